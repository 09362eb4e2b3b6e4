import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import type { PoolRounds } from './scheduler.ts';
import type { RateResult } from './scheduler-graphile.ts';

const percentile = (sorted: number[], p: number) =>
  sorted.length === 0 ? 0 : Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! * 10) / 10;

/**
 * The peer for reserve+ack on PostgreSQL: pg-boss's fetch + complete on the same database, in a
 * schema of its own (dropped by `stop`), with a pool of 10 connections like a Stratus instance's,
 * in the benchmark's process (no HTTP in between). Each pool size gets a queue of its own.
 */
export async function startPgBoss(databaseUrl: string): Promise<{
  /** "pg-boss <version>", for the results. */
  name: string;
  /** send() from `concurrency` callers at once for `seconds`, into a queue of its own. */
  enqueue(concurrency: number, seconds: number): Promise<RateResult>;
  rounds(size: number, workers: number, seconds: number): Promise<PoolRounds>;
  stop(): Promise<void>;
}> {
  const schema = `bench_pgboss_${randomBytes(4).toString('hex')}`;
  const boss = new PgBoss({
    connectionString: databaseUrl,
    schema,
    max: 10,
    // Maintenance, cron and the instance registry would run beside the measurement: off.
    supervise: false,
    schedule: false,
    registerInstance: false,
  });
  const failures: unknown[] = [];
  boss.on('error', (error: unknown) => failures.push(error));
  await boss.start();
  let made = 0;
  let rounds = 0;
  const { version } = JSON.parse(
    readFileSync(new URL('../node_modules/pg-boss/package.json', import.meta.url), 'utf8'),
  ) as { version: string };
  return {
    name: `pg-boss ${version}`,
    async enqueue(concurrency, seconds) {
      const queue = 'bench-enqueue';
      await boss.createQueue(queue);
      const latencies: number[] = [];
      let errors = 0;
      const started = performance.now();
      const until = started + seconds * 1000;
      const caller = async () => {
        while (performance.now() < until) {
          const at = performance.now();
          try {
            await boss.send(queue, { n: 1 });
            latencies.push(performance.now() - at);
          } catch {
            errors++;
          }
        }
      };
      await Promise.all(Array.from({ length: concurrency }, caller));
      const elapsed = (performance.now() - started) / 1000;
      latencies.sort((a, b) => a - b);
      // Out of the way of the fetch+complete measurement that follows.
      await boss.deleteQueue(queue);
      return {
        perSecond: latencies.length / elapsed,
        count: latencies.length,
        p50: percentile(latencies, 0.5),
        p99: percentile(latencies, 0.99),
        errors: errors + failures.splice(0).length,
      };
    },
    async rounds(size, workers, seconds) {
      // A queue of its own each time: a second round at the same size starts from an empty pool.
      const queue = `bench-${size}-${rounds++}`;
      await boss.createQueue(queue);
      return {
        size,
        workers,
        seconds,
        async fill(count) {
          for (let start = 0; start < count; start += 10_000) {
            const jobs = Array.from({ length: Math.min(10_000, count - start) }, () => ({ data: { n: made++ } }));
            await boss.insert(queue, jobs);
          }
        },
        async settle() {
          const client = new pg.Client({ connectionString: databaseUrl });
          await client.connect();
          try {
            const tables = await client.query<{ name: string }>(
              'select tablename as name from pg_tables where schemaname = $1',
              [schema],
            );
            for (const { name } of tables.rows) await client.query(`vacuum analyze ${schema}."${name}"`);
          } finally {
            await client.end();
          }
        },
        async cycle() {
          const [job] = await boss.fetch(queue);
          if (!job) return 'fetch none';
          await boss.complete(queue, job.id);
          if (failures.length > 0) return `error ${String(failures.shift())}`;
          return undefined;
        },
      };
    },
    async stop() {
      await boss.stop({ graceful: false, close: true });
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      try {
        await client.query(`drop schema if exists ${schema} cascade`);
      } finally {
        await client.end();
      }
    },
  };
}
