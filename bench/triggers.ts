// Triggers benchmark (issue 23), through `stratus serve` in its own process: a scheduler whose
// target is a trivial lambda, measured three ways in one run —
//   1. drain: 10,000 due tasks enqueued while the scheduler has no target, then the target is set
//      and the platform delivers them all (tasks delivered per second; every task must be
//      delivered exactly once, checked against the lambda's invocation history);
//   2. lag: tasks enqueued due at once at a steady pace while deliveries run; the lambda logs how
//      long after its due time it ran (p50, p99);
//   3. baseline: the scheduler's own reserve + acknowledge cycles over HTTP with as many workers as
//      the platform's delivery concurrency (SCHEDULER_DELIVERY_CONCURRENCY, default 8), on a
//      scheduler without a target, in the same run.
// Target: ≥ 1,000 deliveries per second on this machine.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import { benchDatabaseUrl, startStratus, type Child } from './lib.ts';
import { measurePool } from './scheduler.ts';

const KEY = 'bench-key';
const USER = 'user-bench';
const IDENTITY = JSON.stringify({ user: { id: USER } });
const DURATION_S = Number(process.env.BENCH_DURATION ?? 5);
/** Tasks of the drain scenario (the "10,000 tasks delivered exactly once"). */
const DRAIN_TASKS = Number(process.env.BENCH_TRIGGER_TASKS ?? 10_000);
/** Tasks per second of the lag scenario: well under the delivery rate, so lag is not backlog. */
const LAG_RATE = 200;
const CONCURRENCY = 8;
/** A trivial lambda: it logs its task and how many milliseconds after the due time it runs. */
const LAMBDA = `export default (req, ctx) => { console.log(ctx.trigger.task_id + ' ' + (Date.now() - req.body.due) + ' ' + ctx.trigger.attempt); return 'ok'; }`;

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** A call on the internal port as the bench user with the scheduler key. */
function call(
  stratus: Child,
  service: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: string }> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: stratus.internalPort,
        path,
        method,
        agent,
        headers: {
          host: `${service}.localhost`,
          'x-gateway-authentication': IDENTITY,
          'x-api-key': KEY,
          ...(text === undefined ? {} : { 'content-type': 'application/json' }),
        },
      },
      (res) => {
        let out = '';
        res.on('data', (chunk: Buffer) => (out += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: out }));
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

async function ok(stratus: Child, service: string, method: string, path: string, body?: unknown): Promise<string> {
  const res = await call(stratus, service, method, path, body);
  if (res.status < 200 || res.status > 299) throw new Error(`${method} ${path} answered ${res.status}: ${res.body}`);
  return res.body;
}

/** Enqueues `count` tasks due at once, `parallel` requests at a time; each payload carries its due time. */
async function enqueue(stratus: Child, scheduler: string, count: number, prefix: string, parallel = 32) {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const n = next++;
      await ok(stratus, 'scheduler', 'POST', `/schedulers/${scheduler}/tasks`, {
        id: `${prefix}-${n}`,
        payload: { due: Date.now() },
      });
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
}

async function health(stratus: Child, scheduler: string): Promise<{ scheduled: number; inflight: number }> {
  return JSON.parse(await ok(stratus, 'scheduler', 'GET', `/schedulers/${scheduler}/health`)) as {
    scheduled: number;
    inflight: number;
  };
}

/** The lambda's console lines, one per invocation: task id, lag in ms, attempt. */
async function deliveries(stratus: Child, lambdaId: string, expected: number) {
  // The history is written in batches off the request path (within about half a second).
  const until = Date.now() + 15_000;
  for (;;) {
    const { invocations } = JSON.parse(
      await ok(stratus, 'lambda', 'GET', `/api/v0/lambdas/${lambdaId}/invocations?limit=${2 * DRAIN_TASKS}`),
    ) as { invocations: { trigger: string; status: number; logs: { message: string }[] }[] };
    if (invocations.length >= expected || Date.now() > until)
      return invocations.map((i) => {
        const [task, lag, attempt] = (i.logs[0]?.message ?? '').split(' ');
        return { task: task ?? '', lag: Number(lag), attempt: Number(attempt), trigger: i.trigger, status: i.status };
      });
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const percentile = (sorted: number[], p: number) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;

async function createTarget(stratus: Child, name: string): Promise<{ lambda: string; scheduler: string }> {
  const lambda = (
    JSON.parse(await ok(stratus, 'lambda', 'POST', '/api/v0/lambdas', { name, code: LAMBDA })) as { id: string }
  ).id;
  await ok(stratus, 'scheduler', 'POST', '/schedulers', { id: name, display_name: name });
  return { lambda, scheduler: name };
}

export async function run(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'stratus-bench-triggers-'));
  const database = await benchDatabaseUrl();
  let stratus: Child | undefined;
  try {
    stratus = await startStratus([], {
      DATA_DIR: dataDir,
      DATABASE_URL: database.url,
      SCHEDULER_API_KEYS: KEY,
      SCHEDULER_DELIVERY_CONCURRENCY: String(CONCURRENCY),
      // Every invocation of the drain stays in the history, to check each task ran exactly once.
      LAMBDA_INVOCATION_HISTORY: String(2 * DRAIN_TASKS),
      // The owner's share of the lambda pool must not be what limits delivery.
      LAMBDA_OWNER_CONCURRENCY: String(4 * CONCURRENCY),
    });
    const s = stratus;
    console.log(
      `triggers benchmark: store ${s.store}; SCHEDULER_DELIVERY_CONCURRENCY=${CONCURRENCY}; a trivial lambda (one console line)`,
    );

    // 1. Drain: the tasks wait, then the target is set.
    const drain = await createTarget(s, 'drain');
    await enqueue(s, drain.scheduler, DRAIN_TASKS, 'drain');
    const started = performance.now();
    await ok(s, 'scheduler', 'PATCH', `/schedulers/${drain.scheduler}`, { target: { lambda_id: drain.lambda } });
    for (;;) {
      const { scheduled, inflight } = await health(s, drain.scheduler);
      if (scheduled === 0 && inflight === 0) break;
      if (performance.now() - started > 300_000) throw new Error(`drain not done in 300 s: ${scheduled} waiting`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const drainSeconds = (performance.now() - started) / 1000;
    const drained = await deliveries(s, drain.lambda, DRAIN_TASKS);
    const distinct = new Set(drained.map((d) => d.task));
    const failed = drained.filter((d) => d.status !== 200 || d.trigger !== 'task').length;
    const exactlyOnce = drained.length === DRAIN_TASKS && distinct.size === DRAIN_TASKS && failed === 0;
    const deliveredPerSecond = DRAIN_TASKS / drainSeconds;

    // 2. Lag: a steady pace of tasks due at once, well under the delivery rate.
    const lag = await createTarget(s, 'lag');
    await ok(s, 'scheduler', 'PATCH', `/schedulers/${lag.scheduler}`, { target: { lambda_id: lag.lambda } });
    const lagTasks = LAG_RATE * DURATION_S;
    const pace = performance.now();
    for (let i = 0; i < lagTasks; i++) {
      const wait = pace + (i * 1000) / LAG_RATE - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      void ok(s, 'scheduler', 'POST', `/schedulers/${lag.scheduler}/tasks`, {
        id: `lag-${i}`,
        payload: { due: Date.now() },
      });
    }
    const lags = (await deliveries(s, lag.lambda, lagTasks)).map((d) => d.lag).sort((a, b) => a - b);

    // 3. Baseline: reserve + acknowledge over HTTP by as many workers, no target.
    await ok(s, 'scheduler', 'POST', '/schedulers', { id: 'manual', display_name: 'manual' });
    let made = 0;
    const baseline = await measurePool({
      size: 1_000,
      workers: CONCURRENCY,
      seconds: DURATION_S,
      fill: async (count) => {
        await enqueue(s, 'manual', count, `manual-${made}`);
        made += count;
      },
      settle: async () => undefined,
      cycle: async () => {
        const reserved = await call(s, 'scheduler', 'POST', '/schedulers/manual/tasks/reserve', { worktime: '30s' });
        if (reserved.status !== 200) return `reserve ${reserved.status}`;
        const { id, lease_id } = JSON.parse(reserved.body) as { id: string; lease_id: string };
        const ack = await call(s, 'scheduler', 'DELETE', `/schedulers/manual/tasks/${id}?lease_id=${lease_id}`);
        return ack.status === 204 ? undefined : `ack ${ack.status}`;
      },
    });

    console.log(
      `\ntriggers: ${DRAIN_TASKS} due tasks delivered to a lambda, store ${s.store} (target ≥ 1,000 tasks/s)`,
    );
    console.table([
      {
        scenario: `reserve + ack over HTTP, ${CONCURRENCY} workers, no target (baseline)`,
        'tasks/s': Math.round(baseline.perSecond),
        'ratio to baseline': '1.000',
        note: `${baseline.cycles} cycles, p50 ${baseline.p50} ms, p99 ${baseline.p99} ms, errors ${baseline.errors}`,
      },
      {
        scenario: `delivered to a lambda (drain of ${DRAIN_TASKS})`,
        'tasks/s': Math.round(deliveredPerSecond),
        'ratio to baseline': (deliveredPerSecond / baseline.perSecond).toFixed(3),
        note: `${drainSeconds.toFixed(2)} s; ${drained.length} invocations, ${distinct.size} distinct tasks, ${failed} failed: ${exactlyOnce ? 'each exactly once' : 'NOT exactly once'}`,
      },
    ]);
    console.log(
      `lag from due time to invocation at ${LAG_RATE} tasks/s (${lags.length} of ${lagTasks} tasks): p50 ${percentile(lags, 0.5)} ms, p99 ${percentile(lags, 0.99)} ms, max ${lags.at(-1) ?? 0} ms`,
    );
    if (!exactlyOnce || baseline.errors > 0 || lags.length !== lagTasks) {
      console.log('BENCH INVALID: a task was not delivered exactly once, or a baseline cycle failed');
      process.exitCode = 1;
    }
  } finally {
    await stratus?.stop();
    agent.destroy();
    await database.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
