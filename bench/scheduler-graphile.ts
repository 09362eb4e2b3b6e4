import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { npmPeer } from './peers.ts';

const VERSION = '0.18.0';

/** The part of graphile-worker's API the bench uses (it is not a dependency, so no types of its own here). */
interface WorkerUtils {
  migrate(): Promise<void>;
  addJob(task: string, payload: unknown): Promise<unknown>;
  addJobs(specs: readonly { identifier: string; payload: unknown }[]): Promise<unknown>;
  release(): Promise<void>;
}
interface Runner {
  stop(): Promise<void>;
  promise: Promise<void>;
}
interface GraphileWorker {
  makeWorkerUtils(options: Record<string, unknown>): Promise<WorkerUtils>;
  run(options: Record<string, unknown>): Promise<Runner>;
  Logger: new (factory: () => (level: string, message: string) => void) => unknown;
}

export interface RateResult {
  perSecond: number;
  count: number;
  p50?: number;
  p99?: number;
  errors: number;
}

export interface GraphilePeer {
  name: string;
  /** addJob from `concurrency` callers at once for `seconds`. */
  enqueue(concurrency: number, seconds: number): Promise<RateResult>;
  /**
   * A runner with `concurrency` slots and a no-op task working a queue of `size` due jobs, kept
   * between half its size and its size; completions per second over `seconds` after one second
   * of warm-up.
   */
  fetchComplete(size: number, concurrency: number, seconds: number): Promise<RateResult>;
  stop(): Promise<void>;
}

const percentile = (sorted: number[], p: number) =>
  sorted.length === 0 ? 0 : Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! * 10) / 10;

/**
 * graphile-worker on the same database in a schema of its own (dropped by `stop`), pools of 10
 * connections like a Stratus instance's, in the benchmark's process. Resolves undefined (after a
 * 'skipped' line from npmPeer) when the package cannot be installed.
 */
export async function startGraphileWorker(databaseUrl: string): Promise<GraphilePeer | undefined> {
  const folder = await npmPeer('graphile-worker', VERSION);
  if (!folder) return undefined;
  const manifest = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as { main: string; version: string };
  const worker = (await import(pathToFileURL(join(folder, manifest.main)).href)) as GraphileWorker;
  const schema = `bench_graphile_${randomBytes(4).toString('hex')}`;
  // Its info lines (one per job) would flood the output and cost it time: warnings and errors only.
  const logger = new worker.Logger(() => (level, message) => {
    if (level === 'error' || level === 'warning') console.log(`graphile-worker ${level}: ${message}`);
  });
  const shared = { connectionString: databaseUrl, schema, maxPoolSize: 10, logger };
  const utils = await worker.makeWorkerUtils(shared);
  await utils.migrate();

  const settle = async () => {
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
  };
  const fill = async (count: number) => {
    for (let start = 0; start < count; start += 10_000) {
      const specs = Array.from({ length: Math.min(10_000, count - start) }, () => ({
        identifier: 'bench',
        payload: { n: 1 },
      }));
      await utils.addJobs(specs);
    }
  };

  return {
    name: `graphile-worker ${manifest.version}`,
    async enqueue(concurrency, seconds) {
      const latencies: number[] = [];
      let errors = 0;
      const started = performance.now();
      const until = started + seconds * 1000;
      const caller = async () => {
        while (performance.now() < until) {
          const at = performance.now();
          try {
            await utils.addJob('enqueue-only', { n: 1 });
            latencies.push(performance.now() - at);
          } catch {
            errors++;
          }
        }
      };
      await Promise.all(Array.from({ length: concurrency }, caller));
      const elapsed = (performance.now() - started) / 1000;
      latencies.sort((a, b) => a - b);
      // What was enqueued here has no task: out of the way of the fetch+complete measurement.
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      try {
        await client.query(`delete from ${schema}._private_jobs`);
      } finally {
        await client.end();
      }
      return {
        perSecond: latencies.length / elapsed,
        count: latencies.length,
        p50: percentile(latencies, 0.5),
        p99: percentile(latencies, 0.99),
        errors,
      };
    },
    async fetchComplete(size, concurrency, seconds) {
      await fill(size);
      await settle();
      const half = Math.max(1, Math.floor(size / 2));
      const events = new EventEmitter();
      let completed = 0;
      let errors = 0;
      let sinceFill = 0;
      let refilling: Promise<void> = Promise.resolve();
      events.on('job:success', () => {
        completed++;
        // Refills run beside the runner (it cannot be paused), so their cost is in its figure.
        if (++sinceFill >= half) {
          sinceFill -= half;
          refilling = refilling.then(() => fill(half));
        }
      });
      events.on('job:error', () => errors++);
      const runner = await worker.run({
        ...shared,
        // One connection per slot, as graphile-worker asks for (it warns below that).
        maxPoolSize: Math.max(shared.maxPoolSize, concurrency),
        events,
        concurrency,
        pollInterval: 1000,
        noHandleSignals: true,
        taskList: { bench: async () => {} },
      });
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const from = completed;
      const started = performance.now();
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      const count = completed - from;
      const elapsed = (performance.now() - started) / 1000;
      await runner.stop();
      await refilling;
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      try {
        await client.query(`delete from ${schema}._private_jobs`);
      } finally {
        await client.end();
      }
      return { perSecond: count / elapsed, count, errors };
    },
    async stop() {
      await utils.release();
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
