import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { benchDatabaseUrl, flagFailures, load, startStratus } from './lib.ts';

const HOST = 'scheduler.localhost';
const KEY = 'bench-key';
const DURATION_S = Number(process.env.BENCH_DURATION ?? 5);
const WORKERS = 16;

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

/** Reserve + acknowledge (under the lease) in a loop on `WORKERS` connections for `seconds`. */
async function cycles(
  port: number,
  seconds: number,
): Promise<{ perSecond: number; errors: number; cycles: number; statuses: Record<string, number> }> {
  const until = performance.now() + seconds * 1000;
  let done = 0;
  let errors = 0;
  // Unexpected answers by step and status ("reserve 429" → count), printed when the run is flagged.
  const statuses: Record<string, number> = {};
  const unexpected = (what: string) => {
    errors++;
    statuses[what] = (statuses[what] ?? 0) + 1;
  };
  const started = performance.now();
  const worker = async () => {
    while (performance.now() < until) {
      const reserved = await call(port, 'POST', '/schedulers/bench/tasks/reserve', '{"worktime":"30s"}');
      if (reserved.status !== 200) {
        unexpected(`reserve ${reserved.status}`);
        continue;
      }
      const { id, lease_id } = JSON.parse(reserved.body) as { id: string; lease_id: string };
      const ack = await call(port, 'DELETE', `/schedulers/bench/tasks/${id}?lease_id=${lease_id}`);
      if (ack.status === 204) done++;
      else unexpected(`ack ${ack.status}`);
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, worker));
  return { perSecond: done / ((performance.now() - started) / 1000), errors, cycles: done, statuses };
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
  try {
    const stratus = await startStratus(['--services', 'scheduler'], {
      DATA_DIR: join(dir, 'data'),
      DATABASE_URL: database.url,
      SCHEDULER_API_KEYS: KEY,
    });
    try {
      const port = stratus.internalPort;
      const created = await call(port, 'POST', '/schedulers', '{"id":"bench","display_name":"bench"}');
      if (created.status !== 201) throw new Error(`create scheduler: ${created.status} ${created.body}`);
      const enqueue = await load('enqueue over HTTP (50 connections)', {
        url: `http://127.0.0.1:${port}/schedulers/bench/tasks`,
        method: 'POST',
        headers: { host: HOST, 'x-api-key': KEY, 'content-type': 'application/json' },
        body: '{"payload":{"n":1},"labels":["kind:bench"]}',
        connections: 50,
        duration: DURATION_S,
      });
      const cycle = await cycles(port, DURATION_S);
      const base = baseline(dir, DURATION_S);
      const store = stratus.store === 'SQLite' ? 'SQLite, synchronous=FULL' : stratus.store;
      console.log(
        `\nscheduler benchmark (store ${store}; baselines SQLite, synchronous=FULL), ${DURATION_S} s per phase`,
      );
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
        {
          scenario: `reserve+ack cycles (HTTP, ${WORKERS} workers)`,
          'per second': Math.round(cycle.perSecond),
          'p50 ms': '',
          'p99 ms': '',
          'errors+non2xx': cycle.errors,
          'ratio to baseline': (cycle.perSecond / base.cycles).toFixed(3),
        },
        {
          scenario: 'cycle baseline (SQLite claim+delete, one commit each)',
          'per second': Math.round(base.cycles),
          'p50 ms': '',
          'p99 ms': '',
          'errors+non2xx': 0,
          'ratio to baseline': '1.000',
        },
      ]);
      console.log('targets: ≥ 2,000 enqueues/s and ≥ 1,000 reserve+ack cycles/s over HTTP');
      // Failed enqueues count in autocannon's rate; failed cycles are left out of theirs but still fail the run.
      flagFailures([
        enqueue,
        { name: `reserve+ack cycles (${WORKERS} workers)`, errors: 0, non2xx: cycle.errors, statuses: cycle.statuses },
      ]);
    } finally {
      await stratus.stop();
    }
  } finally {
    agent.destroy();
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
