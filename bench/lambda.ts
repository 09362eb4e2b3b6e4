// Lambda benchmark, through the platform (`stratus serve`, public port, lambda.<domain>): warm
// hello-world via /run/{id} beside a plain Fastify route answering the same JSON in its own
// process, cold first calls after create, and the latency of a health request (the gateway's
// /v0/stats) while runaway lambdas loop.
//
// Every invocation here is one owner's (the bench user's), and the platform runs at most
// LAMBDA_OWNER_CONCURRENCY of one owner's invocations at once (default 8, as many more wait, beyond
// → 429). The server is therefore started with a cap above the connection count, so the warm
// scenario measures invocations and not refusals; any non-2xx answer fails the run (lib.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import {
  benchDatabaseUrl,
  interleaved,
  report,
  spawnServer,
  startStratus,
  stopper,
  waitForPorts,
  type Child,
} from './lib.ts';

const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = 50;
/** The per-owner cap the server gets (LAMBDA_OWNER_CONCURRENCY): above CONNECTIONS, so no 429. */
const OWNER_CONCURRENCY = 2 * CONNECTIONS;
const IDENTITY = JSON.stringify({ user: { id: 'user-bench' } });
const HELLO = 'export default (req) => ({ body: { message: "Hello, World!", method: req.method, path: req.path } })';
const HELLO_JSON = JSON.stringify({ body: { message: 'Hello, World!', method: 'GET', path: '/hello-world' } });

/** The baseline: a plain Fastify route answering the same JSON, in its own process. */
async function startPlainFastify(): Promise<Child> {
  const script = `
    const fastify = require('fastify')();
    fastify.get('/*', async (request, reply) => reply.type('application/json; charset=utf-8').send(${JSON.stringify(HELLO_JSON)}));
    fastify.listen({ port: 0, host: '127.0.0.1' }).then(() => console.log('plain port ' + fastify.server.address().port));
    process.on('SIGTERM', () => process.exit(0));
  `;
  const child = spawnServer(['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  const match = await waitForPorts(child, /plain port (\d+)/);
  return { port: Number(match[1]), internalPort: 0, stop: stopper(child) };
}

function request(
  port: number,
  host: string,
  method: string,
  path: string,
  body?: string,
  identity = false,
): Promise<{ status: number; body: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { host };
    if (identity) headers['x-gateway-authentication'] = IDENTITY;
    if (body !== undefined)
      Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    const req = http.request({ host: '127.0.0.1', port, path, method, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, ms: performance.now() - started }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Lambdas are created on the internal port as the bench user; they are then called publicly. */
async function createLambda(stratus: Child, name: string, code: string): Promise<string> {
  const res = await request(
    stratus.internalPort,
    'lambda.localhost',
    'POST',
    '/api/v0/lambdas',
    JSON.stringify({ name, code, method: 'GET', path: '/hello-world' }),
    true,
  );
  if (res.status !== 201) throw new Error(`create ${name} answered ${res.status}: ${res.body}`);
  return (JSON.parse(res.body) as { id: string }).id;
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
};

export async function run(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'stratus-bench-lambda-'));
  // A schema of its own on PostgreSQL (DATABASE_URL), dropped afterwards.
  const database = await benchDatabaseUrl();
  const children: Child[] = [];
  try {
    const stratus = await startStratus([], {
      DATA_DIR: dataDir,
      DATABASE_URL: database.url,
      LAMBDA_OWNER_CONCURRENCY: String(OWNER_CONCURRENCY),
    });
    children.push(stratus);
    console.log(
      `lambda benchmark: store ${stratus.store}; LAMBDA_OWNER_CONCURRENCY=${OWNER_CONCURRENCY} (per-owner cap, default 8) for ${CONNECTIONS} connections of one owner`,
    );
    const plain = await startPlainFastify();
    children.push(plain);
    const hello = await createLambda(stratus, 'hello-world', HELLO);
    const check = await request(stratus.port, 'lambda.localhost', 'GET', `/run/${hello}`);
    if (check.body !== HELLO_JSON) throw new Error(`hello-world answered ${check.status} ${check.body}`);

    // 1. Warm invocation beside the plain route, 50 connections, interleaved rounds.
    const [baseline, warm] = await interleaved(
      [
        {
          name: 'plain Fastify route, same JSON',
          options: { url: `http://127.0.0.1:${plain.port}/run/${hello}`, connections: CONNECTIONS },
        },
        {
          name: 'warm hello-world via gateway /run/{id}',
          options: {
            url: `http://127.0.0.1:${stratus.port}/run/${hello}`,
            headers: { host: 'lambda.localhost' },
            connections: CONNECTIONS,
          },
        },
      ],
      { rounds: 2, roundSeconds: DURATION_S / 2, warmupSeconds: 3 },
    );
    report(
      `lambda: warm invocation, ${CONNECTIONS} connections of one owner, LAMBDA_OWNER_CONCURRENCY=${OWNER_CONCURRENCY}, store ${stratus.store} (target ≥ 2,000 req/s)`,
      baseline!,
      [warm!],
    );

    // 2. Cold first call after create: 100 lambdas with distinct code (no compile-cache hits).
    const cold: number[] = [];
    for (let i = 0; i < 100; i++) {
      const id = await createLambda(stratus, `cold-${i}`, HELLO.replace('Hello, World!', `Hello ${i}`));
      const res = await request(stratus.port, 'lambda.localhost', 'GET', `/run/${id}`);
      if (res.status !== 200) throw new Error(`cold call answered ${res.status}`);
      cold.push(res.ms);
    }
    console.log(
      `\ncold first call after create (100 lambdas, via the gateway): p50 ${percentile(cold, 50).toFixed(2)} ms, p99 ${percentile(cold, 99).toFixed(2)} ms (target p50 ≤ 25 ms)`,
    );

    // 3. Health latency while runaway lambdas loop until the wall-clock limit.
    const loop = await createLambda(stratus, 'runaway', 'while (true) {}');
    const runaway = Array.from({ length: 2 }, () => request(stratus.port, 'lambda.localhost', 'GET', `/run/${loop}`));
    await new Promise((r) => setTimeout(r, 200));
    const health: number[] = [];
    const until = Date.now() + 3_000;
    while (Date.now() < until) {
      health.push((await request(stratus.port, 'gateway.localhost', 'GET', '/v0/stats')).ms);
      await new Promise((r) => setTimeout(r, 10));
    }
    console.log(
      `health (gateway /v0/stats) during 2 runaway lambdas (${health.length} requests): p50 ${percentile(health, 50).toFixed(2)} ms, p99 ${percentile(health, 99).toFixed(2)} ms (target p99 < 100 ms)`,
    );
    const outcomes = await Promise.all(runaway);
    console.log(
      `runaway lambdas answered: ${outcomes.map((o) => `${o.status} ${(JSON.parse(o.body) as { error?: { code: string } }).error?.code ?? ''}`).join(', ')}`,
    );
  } finally {
    for (const child of children.reverse()) await child.stop();
    await database.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
