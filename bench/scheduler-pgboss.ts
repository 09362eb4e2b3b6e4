import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import type { PoolRounds } from './scheduler.ts';

/**
 * The peer for reserve+ack on PostgreSQL: pg-boss's fetch + complete on the same database, in a
 * schema of its own (dropped by `stop`), with a pool of 10 connections like a Stratus instance's,
 * in the benchmark's process (no HTTP in between). Each pool size gets a queue of its own.
 */
export async function startPgBoss(databaseUrl: string): Promise<{
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
  return {
    async rounds(size, workers, seconds) {
      const queue = `bench-${size}`;
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
