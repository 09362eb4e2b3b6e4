import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import pg from 'pg';
import { benchDatabaseUrl, flagFailures, load, startStratus, type LoadResult } from './lib.ts';
import { startPgBoss } from './scheduler-pgboss.ts';
import { startGraphileWorker, type RateResult } from './scheduler-graphile.ts';
import { recordResult } from './results.ts';

const HOST = 'scheduler.localhost';
const KEY = 'bench-key';
const DURATION_S = Number(process.env.BENCH_DURATION ?? 5);
const WORKERS = 16;
/** Pool sizes reserve+ack runs at (tasks due when it starts; see measurePool). */
const POOLS = [1_000, 100_000];

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function call(port: number, method: string, path: string, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        agent,
        headers: { host: HOST, 'x-api-key': KEY, 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export interface CycleResult {
  perSecond: number;
  cycles: number;
  p50: number;
  p99: number;
  errors: number;
  /** Unexpected answers by step and status ("reserve 429" → count), printed when the run is flagged. */
  statuses: Record<string, number>;
}

/** One pool-size scenario: how to add tasks to the pool and how to run one reserve+ack. */
export interface PoolRounds {
  size: number;
  workers: number;
  seconds: number;
  /** Adds `count` due tasks to the pool. */
  fill(count: number): Promise<void>;
  /**
   * After the first fill: what a pool grown over time would have had done to it already
   * (statistics, a vacuum, a checkpoint), so that the measurement does not pay for the bulk insert.
   */
  settle(): Promise<void>;
  /** One reserve (fetch) and acknowledge (complete); a label of what went wrong, if anything. */
  cycle(): Promise<string | undefined>;
}

const percentile = (sorted: number[], p: number) =>
  sorted.length === 0 ? 0 : Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! * 10) / 10;

/** Cycles on every worker until `limit` have begun or `ms` have passed; what each took, in order. */
async function round(rounds: PoolRounds, limit: number, ms: number) {
  const until = performance.now() + ms;
  const outcomes: (number | string)[] = [];
  let begun = 0;
  const worker = async () => {
    while (begun < limit && performance.now() < until) {
      begun++;
      const at = performance.now();
      outcomes.push((await rounds.cycle()) ?? performance.now() - at);
    }
  };
  await Promise.all(Array.from({ length: rounds.workers }, worker));
  return { begun, outcomes };
}

/** Reserve+ack cycles before the measurement (first calls, connections, caches). */
const WARMUP_MS = 1000;

/**
 * Reserve+ack cycles on `workers` connections for `seconds` of cycling, on a pool that stays
 * between half its size and its size: filled to `size`, then each time half of it has been
 * used, the workers pause and half is added again (the pauses are not counted). A second of
 * cycles comes first, uncounted, and what it used is put back.
 */
export async function measurePool(rounds: PoolRounds): Promise<CycleResult> {
  const half = Math.max(1, Math.floor(rounds.size / 2));
  await rounds.fill(rounds.size);
  await rounds.settle();
  const warmup = await round(rounds, half, WARMUP_MS);
  await rounds.fill(warmup.begun);
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  let cycling = 0;
  for (;;) {
    const started = performance.now();
    const { begun, outcomes } = await round(rounds, half, rounds.seconds * 1000 - cycling);
    cycling += performance.now() - started;
    for (const outcome of outcomes) {
      if (typeof outcome === 'number') latencies.push(outcome);
      else {
        errors++;
        statuses[outcome] = (statuses[outcome] ?? 0) + 1;
      }
    }
    if (cycling >= rounds.seconds * 1000) break;
    await rounds.fill(begun);
  }
  latencies.sort((a, b) => a - b);
  return {
    perSecond: latencies.length / (cycling / 1000),
    cycles: latencies.length,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    errors,
    statuses,
  };
}

/** Alternating rounds of reserve+ack beside pg-boss at each pool size. */
const PEER_ROUNDS = 2;

/** Rounds of one scenario as one figure: the mean rate, the worst percentiles, every failure. */
function sumStatuses(all: Record<string, number>[]): Record<string, number> {
  const statuses: Record<string, number> = {};
  for (const one of all)
    for (const [label, count] of Object.entries(one)) statuses[label] = (statuses[label] ?? 0) + count;
  return statuses;
}

function combined(results: CycleResult[]): CycleResult {
  const statuses = sumStatuses(results.map((r) => r.statuses));
  return {
    perSecond: results.reduce((sum, r) => sum + r.perSecond, 0) / results.length,
    cycles: results.reduce((sum, r) => sum + r.cycles, 0),
    p50: Math.max(...results.map((r) => r.p50)),
    p99: Math.max(...results.map((r) => r.p99)),
    errors: results.reduce((sum, r) => sum + r.errors, 0),
    statuses,
  };
}

const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;

/** A peer's enqueue rounds as one figure: the mean rate, the worst percentiles. */
function combinedRate(results: RateResult[]): RateResult {
  return {
    perSecond: mean(results.map((r) => r.perSecond)),
    count: results.reduce((sum, r) => sum + r.count, 0),
    p50: Math.max(...results.map((r) => r.p50 ?? 0)),
    p99: Math.max(...results.map((r) => r.p99 ?? 0)),
    errors: results.reduce((sum, r) => sum + r.errors, 0),
  };
}

/** Reserve + acknowledge under the lease, over HTTP. */
async function stratusCycle(port: number): Promise<string | undefined> {
  const reserved = await call(port, 'POST', '/schedulers/bench/tasks/reserve', '{"worktime":"30s"}');
  if (reserved.status !== 200) return `reserve ${reserved.status}`;
  const { id, lease_id } = JSON.parse(reserved.body) as { id: string; lease_id: string };
  const ack = await call(port, 'DELETE', `/schedulers/bench/tasks/${id}?lease_id=${lease_id}`);
  return ack.status === 204 ? undefined : `ack ${ack.status}`;
}

/**
 * Fills the server's own table directly, many rows per statement (enqueueing 100,000 tasks over
 * HTTP would take longer than the measurement); the server is idle meanwhile. `clear` empties
 * the scheduler first.
 */
async function taskTable(databaseUrl: string | undefined, dataDir: string) {
  let made = 0;
  // A day ago, one millisecond apart: every task is due, in the order it was made.
  const due = Date.now() - 86_400_000;
  if (databaseUrl) {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    return {
      clear: async () => void (await client.query("delete from scheduler_tasks where scheduler_id = 'bench'")),
      settle: async () => void (await client.query('vacuum analyze scheduler_tasks')),
      fill: async (count: number) => {
        await client.query(
          `insert into scheduler_tasks (scheduler_id, id, payload, labels, due_ms)
           select 'bench', 'pool-' || (g + $1::bigint), '{"n":1}', '["kind:bench"]', $2::bigint + g + $1::bigint
           from generate_series(1, $3::integer) g`,
          [made, due, count],
        );
        made += count;
      },
      close: () => client.end(),
    };
  }
  const db = new Database(join(dataDir, 'stratus.db'));
  db.pragma('busy_timeout = 5000');
  const insert = db.prepare(
    "insert into scheduler_tasks (scheduler_id, id, payload, labels, due_ms) values ('bench', ?, '{\"n\":1}', '[\"kind:bench\"]', ?)",
  );
  const fill = db.transaction((count: number) => {
    for (let i = 0; i < count; i++, made++) insert.run(`pool-${made}`, due + made);
  });
  return {
    clear: async () => void db.prepare("delete from scheduler_tasks where scheduler_id = 'bench'").run(),
    settle: async () => void db.pragma('wal_checkpoint(TRUNCATE)'),
    fill: async (count: number) => fill(count),
    close: async () => db.close(),
  };
}

/**
 * The baseline: the same rows, indexes and statements straight into SQLite (WAL, synchronous=FULL
 * like the server), one transaction per enqueue and per claim/acknowledge, no HTTP.
 */
function baseline(dir: string, seconds: number): { enqueues: number; cycles: number } {
  const db = new Database(join(dir, 'baseline.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`create table scheduler_tasks (seq integer primary key autoincrement, scheduler_id text not null, id text not null, payload text not null, labels text not null, due_ms bigint not null, lease_id text, unique (scheduler_id, id));
    create index scheduler_tasks_due on scheduler_tasks (scheduler_id, due_ms, seq);
    create index scheduler_tasks_order on scheduler_tasks (scheduler_id, seq);`);
  const insert = db.prepare(
    'insert into scheduler_tasks (scheduler_id, id, payload, labels, due_ms) values (?, ?, ?, ?, ?)',
  );
  const claim = db.prepare(
    'update scheduler_tasks set lease_id = ?, due_ms = ? where seq = (select seq from scheduler_tasks where scheduler_id = ? and due_ms <= ? order by due_ms, seq limit 1) returning id',
  );
  const ack = db.prepare(
    'delete from scheduler_tasks where scheduler_id = ? and id = ? and lease_id = ? and due_ms > ?',
  );
  let until = performance.now() + seconds * 1000;
  let enqueued = 0;
  let started = performance.now();
  while (performance.now() < until) {
    insert.run('bench', `task-${randomUUID()}`, '{"n":1}', '[]', Date.now());
    enqueued++;
  }
  const enqueues = enqueued / ((performance.now() - started) / 1000);
  until = performance.now() + seconds * 1000;
  started = performance.now();
  let cycled = 0;
  while (performance.now() < until) {
    const lease = randomUUID();
    const now = Date.now();
    const row = claim.get(lease, now + 30_000, 'bench', now) as { id: string } | undefined;
    if (!row) break;
    ack.run('bench', row.id, lease, now);
    cycled++;
  }
  db.close();
  return { enqueues, cycles: cycled / ((performance.now() - started) / 1000) };
}

export async function run(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-scheduler-'));
  // With DATABASE_URL the server runs on PostgreSQL, in a schema of its own dropped afterwards.
  const database = await benchDatabaseUrl();
  const peer = process.env.DATABASE_URL ? await startPgBoss(process.env.DATABASE_URL) : undefined;
  const graphile = process.env.DATABASE_URL ? await startGraphileWorker(process.env.DATABASE_URL) : undefined;
  if (!process.env.DATABASE_URL)
    console.log('scheduler bench on SQLite: no PostgreSQL peers (pg-boss, graphile-worker need DATABASE_URL)');
  try {
    const dataDir = join(dir, 'data');
    const stratus = await startStratus(['--services', 'scheduler'], {
      DATA_DIR: dataDir,
      DATABASE_URL: database.url,
      SCHEDULER_API_KEYS: KEY,
    });
    try {
      const port = stratus.internalPort;
      const created = await call(port, 'POST', '/schedulers', '{"id":"bench","display_name":"bench"}');
      if (created.status !== 201) throw new Error(`create scheduler: ${created.status} ${created.body}`);
      // Stratus's enqueue and the peers' (from as many callers at once, in process: no HTTP) in
      // alternating rounds, so that a shared machine's swings move them alike.
      const rounds = peer || graphile ? PEER_ROUNDS : 1;
      const enqueues: LoadResult[] = [];
      const pgBossEnqueues: RateResult[] = [];
      const graphileEnqueues: RateResult[] = [];
      for (let round = 0; round < rounds; round++) {
        enqueues.push(
          await load('enqueue over HTTP (50 connections)', {
            url: `http://127.0.0.1:${port}/schedulers/bench/tasks`,
            method: 'POST',
            headers: { host: HOST, 'x-api-key': KEY, 'content-type': 'application/json' },
            body: '{"payload":{"n":1},"labels":["kind:bench"]}',
            connections: 50,
            duration: DURATION_S / rounds,
          }),
        );
        if (peer) pgBossEnqueues.push(await peer.enqueue(50, DURATION_S / rounds));
        if (graphile) graphileEnqueues.push(await graphile.enqueue(50, DURATION_S / rounds));
      }
      const enqueue: LoadResult = {
        name: enqueues[0]!.name,
        requestsPerSecond: mean(enqueues.map((r) => r.requestsPerSecond)),
        p50: Math.max(...enqueues.map((r) => r.p50)),
        p99: Math.max(...enqueues.map((r) => r.p99)),
        errors: enqueues.reduce((sum, r) => sum + r.errors, 0),
        non2xx: enqueues.reduce((sum, r) => sum + r.non2xx, 0),
        statuses: sumStatuses(enqueues.map((r) => r.statuses ?? {})),
      };
      const pgBossEnqueue = peer ? combinedRate(pgBossEnqueues) : undefined;
      const graphileEnqueue = graphile ? combinedRate(graphileEnqueues) : undefined;
      // Reserve+ack at each pool size, pg-boss's fetch+complete right after at the same size.
      const tasks = await taskTable(database.url, dataDir);
      const cycles = new Map<number, { stratus: CycleResult; pgBoss?: CycleResult; graphile?: RateResult }>();
      try {
        for (const size of POOLS) {
          // Stratus and pg-boss in alternating rounds (A B A B), so that a shared machine's swings
          // move both alike; each round starts from a fresh pool of `size`.
          const owns: CycleResult[] = [];
          const others: CycleResult[] = [];
          for (let round = 0; round < PEER_ROUNDS; round++) {
            await tasks.clear();
            owns.push(
              await measurePool({
                size,
                workers: WORKERS,
                seconds: DURATION_S / PEER_ROUNDS,
                fill: tasks.fill,
                settle: tasks.settle,
                cycle: () => stratusCycle(port),
              }),
            );
            if (peer) others.push(await measurePool(await peer.rounds(size, WORKERS, DURATION_S / PEER_ROUNDS)));
          }
          const own = combined(owns);
          const other = peer ? combined(others) : undefined;
          const third = graphile ? await graphile.fetchComplete(size, WORKERS, DURATION_S) : undefined;
          cycles.set(size, { stratus: own, ...(other && { pgBoss: other }), ...(third && { graphile: third }) });
        }
      } finally {
        await tasks.close();
      }
      const base = baseline(dir, DURATION_S);
      const store = stratus.store === 'SQLite' ? 'SQLite, synchronous=FULL' : stratus.store;
      console.log(
        `\nscheduler benchmark (store ${store}; baselines SQLite, synchronous=FULL), ${DURATION_S} s per phase`,
      );
      const pool = (size: number) => `pool ${size.toLocaleString('en')}`;
      console.table([
        {
          scenario: 'enqueue (HTTP, 50 connections)',
          'per second': Math.round(enqueue.requestsPerSecond),
          'p50 ms': enqueue.p50,
          'p99 ms': enqueue.p99,
          'errors+non2xx': enqueue.errors + enqueue.non2xx,
          'ratio to baseline': (enqueue.requestsPerSecond / base.enqueues).toFixed(3),
        },
        {
          scenario: 'enqueue baseline (SQLite, one commit each)',
          'per second': Math.round(base.enqueues),
          'p50 ms': '',
          'p99 ms': '',
          'errors+non2xx': 0,
          'ratio to baseline': '1.000',
        },
        ...[...cycles].map(([size, { stratus: r }]) => ({
          scenario: `reserve+ack (HTTP, ${WORKERS} workers, ${pool(size)})`,
          'per second': Math.round(r.perSecond),
          'p50 ms': r.p50,
          'p99 ms': r.p99,
          'errors+non2xx': r.errors,
          'ratio to baseline': (r.perSecond / base.cycles).toFixed(3),
        })),
        {
          scenario: 'cycle baseline (SQLite claim+delete, one commit each)',
          'per second': Math.round(base.cycles),
          'p50 ms': '',
          'p99 ms': '',
          'errors+non2xx': 0,
          'ratio to baseline': '1.000',
        },
      ]);
      if (peer || graphile) {
        console.log(
          `\nenqueue beside the PostgreSQL peers (50 at once; the peers in process without HTTP, pools of 10 connections)`,
        );
        console.table([
          { system: 'Stratus (HTTP)', 'per second': Math.round(enqueue.requestsPerSecond), 'p50 ms': enqueue.p50 },
          ...(pgBossEnqueue
            ? [
                {
                  system: 'pg-boss send',
                  'per second': Math.round(pgBossEnqueue.perSecond),
                  'p50 ms': pgBossEnqueue.p50,
                },
              ]
            : []),
          ...(graphileEnqueue
            ? [
                {
                  system: `${graphile!.name} addJob`,
                  'per second': Math.round(graphileEnqueue.perSecond),
                  'p50 ms': graphileEnqueue.p50,
                },
              ]
            : []),
        ]);
        console.log(
          `\nreserve+ack beside pg-boss fetch+complete and a graphile-worker runner (${WORKERS} workers / concurrency, same database, peers without HTTP, pools of 10 connections each)`,
        );
        console.table(
          [...cycles].map(([size, { stratus: r, pgBoss: p, graphile: g }]) => ({
            pool: size.toLocaleString('en'),
            'Stratus /s': Math.round(r.perSecond),
            'Stratus p50 ms': r.p50,
            'pg-boss /s': p ? Math.round(p.perSecond) : '',
            'pg-boss p50 ms': p ? p.p50 : '',
            'ratio to pg-boss': p ? (r.perSecond / p.perSecond).toFixed(3) : '',
            'graphile-worker /s': g ? Math.round(g.perSecond) : '',
          })),
        );
      }
      if (pgBossEnqueue)
        recordResult({
          bench: 'scheduler',
          path: 'enqueue (HTTP, 50 connections) vs pg-boss send (in process, 50 at once)',
          figure: enqueue.requestsPerSecond,
          unit: 'tasks/s',
          p50: enqueue.p50,
          p99: enqueue.p99,
          peer: { name: peer!.name, figure: pgBossEnqueue.perSecond, p50: pgBossEnqueue.p50, p99: pgBossEnqueue.p99 },
          target: '≥ pg-boss',
          met: enqueue.requestsPerSecond >= pgBossEnqueue.perSecond,
          ...(enqueue.requestsPerSecond < pgBossEnqueue.perSecond && {
            note: 'enqueues over HTTP, batched into one multi-row insert per commit; pg-boss sends in process, no HTTP',
          }),
        });
      if (graphileEnqueue)
        recordResult({
          bench: 'scheduler',
          path: 'enqueue (HTTP, 50 connections) vs graphile-worker addJob (in process, 50 at once)',
          figure: enqueue.requestsPerSecond,
          unit: 'tasks/s',
          p50: enqueue.p50,
          p99: enqueue.p99,
          peer: {
            name: graphile!.name,
            figure: graphileEnqueue.perSecond,
            p50: graphileEnqueue.p50,
            p99: graphileEnqueue.p99,
          },
          note: 'informational',
        });
      for (const [size, { stratus: r, pgBoss: p, graphile: g }] of cycles) {
        if (p)
          recordResult({
            bench: 'scheduler',
            path: `reserve+ack (HTTP, ${WORKERS} workers, ${pool(size)}) vs pg-boss fetch+complete`,
            figure: r.perSecond,
            unit: 'cycles/s',
            p50: r.p50,
            p99: r.p99,
            peer: { name: peer!.name, figure: p.perSecond, p50: p.p50, p99: p.p99 },
            target: '≥ pg-boss',
            met: r.perSecond >= p.perSecond,
            ...(r.perSecond < p.perSecond && {
              note: 'server mostly idle in its CPU profile (statements prepared, concurrent reserves and acknowledges one statement each): a cycle is two HTTP requests, each through a process more (client, server, PostgreSQL) than pg-boss, which makes its two in process',
            }),
          });
        if (g)
          recordResult({
            bench: 'scheduler',
            path: `reserve+ack (HTTP, ${WORKERS} workers, ${pool(size)}) vs graphile-worker runner (concurrency ${WORKERS})`,
            figure: r.perSecond,
            unit: 'cycles/s',
            p50: r.p50,
            p99: r.p99,
            peer: { name: graphile!.name, figure: g.perSecond },
            note: 'informational; the peer counts job completions of a running worker, refills beside it',
          });
      }
      const [smallest, largest] = [cycles.get(POOLS[0]!)!, cycles.get(POOLS[POOLS.length - 1]!)!];
      console.log(
        `reserve+ack at ${pool(POOLS[POOLS.length - 1]!)} / at ${pool(POOLS[0]!)}: ${(largest.stratus.perSecond / smallest.stratus.perSecond).toFixed(3)}`,
      );
      console.log(
        'targets: ≥ 2,000 enqueues/s and ≥ 1,000 reserve+ack cycles/s over HTTP; on PostgreSQL reserve+ack ≥ pg-boss, flat from pool 1,000 to 100,000',
      );
      // Failed enqueues count in autocannon's rate; failed cycles are left out of theirs but still fail the run.
      flagFailures([
        enqueue,
        ...[...cycles].flatMap(([size, { stratus: r, pgBoss: p }]) => [
          { name: `reserve+ack (${pool(size)})`, errors: 0, non2xx: r.errors, statuses: r.statuses },
          ...(p ? [{ name: `pg-boss (${pool(size)})`, errors: 0, non2xx: p.errors, statuses: p.statuses }] : []),
        ]),
      ]);
    } finally {
      await stratus.stop();
    }
  } finally {
    agent.destroy();
    await peer?.stop();
    await graphile?.stop();
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
