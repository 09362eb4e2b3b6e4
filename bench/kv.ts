import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type autocannon from 'autocannon';
import { benchDatabaseUrl, interleaved, report, startBareFastify, startStratus, type Child } from './lib.ts';

// `npm run bench -- kv`: set and get at 50 connections on a node's internal port (the trusted
// network, presence-only auth) beside a bare Fastify route in the same run, then the replication
// lag from a write acknowledged by a parent to its arrival at a child.
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const KEYS = 10_000;
const LAG_SAMPLES = 500;
const HOST = 'kv.localhost';
const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'bench' } }) };

function call(port: number, method: string, path: string, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: { host: HOST, 'content-type': 'application/json', ...identity },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function draw(count: number, make: (i: number) => autocannon.Request): autocannon.Request[] {
  return Array.from({ length: count }, (_, i) => make(i));
}

/** Writes one key at a time to `root` and times each until the child's own feed passes it on. */
async function replicationLag(root: Child, child: Child): Promise<number[]> {
  const latencies: number[] = [];
  const pending = new Map<string, number>();
  const feed = http.request({
    host: '127.0.0.1',
    port: child.internalPort,
    method: 'POST',
    path: '/v1/replicate',
    headers: { host: HOST, ...identity },
  });
  let wake: (() => void) | undefined;
  feed.on('response', (res) => {
    let rest = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      const lines = (rest + chunk).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) {
        const match = /"key":"(lag-\d+)"/.exec(line);
        const started = match ? pending.get(match[1]!) : undefined;
        if (started === undefined) continue;
        latencies.push(performance.now() - started);
        pending.delete(match![1]!);
        wake?.();
      }
    });
    res.on('error', () => {});
  });
  feed.on('error', () => {});
  feed.end();
  await new Promise((resolve) => setTimeout(resolve, 500));
  for (let i = 0; i < LAG_SAMPLES; i++) {
    const key = `lag-${i}`;
    const arrived = new Promise<void>((resolve) => (wake = resolve));
    pending.set(key, performance.now());
    const answer = await call(root.internalPort, 'POST', `/v1/collections/bench/keys/${key}`, `{"value":${i}}`);
    if (answer.status !== 200) throw new Error(`lag write answered ${answer.status}: ${answer.text}`);
    await Promise.race([arrived, new Promise((resolve) => setTimeout(resolve, 2_000))]);
  }
  feed.destroy();
  if (latencies.length < LAG_SAMPLES)
    throw new Error(`only ${latencies.length} of ${LAG_SAMPLES} writes reached the child`);
  return latencies.sort((a, b) => a - b);
}

export async function run(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-kv-'));
  // The platform's own store: a schema of its own on PostgreSQL (DATABASE_URL), dropped afterwards.
  const database = await benchDatabaseUrl();
  const children: Child[] = [];
  try {
    // The node keeps its data in the platform store: SQLite in DATA_DIR, or PostgreSQL with DATABASE_URL.
    const root = await startStratus(['--services', 'kv', '--kv-node-name', 'bench-root'], {
      DATA_DIR: join(dir, 'root'),
      DATABASE_URL: database.url,
    });
    children.push(root);
    const store = `store: ${root.store}`;
    const created = await call(root.internalPort, 'POST', '/v1/collections', '{"name":"bench"}');
    if (created.status !== 200) throw new Error(`creating the collection answered ${created.status}: ${created.text}`);
    for (let i = 0; i < KEYS; i += 500) {
      await Promise.all(
        Array.from({ length: 500 }, (_, j) =>
          call(
            root.internalPort,
            'POST',
            `/v1/collections/bench/keys/key-${i + j}`,
            `{"value":{"n":${i + j},"name":"user ${i + j}"}}`,
          ),
        ),
      );
    }
    const sample = (await call(root.internalPort, 'GET', '/v1/collections/bench/keys/key-42')).text;
    const bare = await startBareFastify(sample);
    children.push(bare);

    const headers = { host: HOST, 'content-type': 'application/json', ...identity };
    const sets = draw(20_000, (i) => ({
      method: 'POST',
      path: `/v1/collections/bench/keys/key-${Math.floor(Math.random() * KEYS)}`,
      body: `{"value":{"n":${i},"name":"user ${i}"}}`,
    }));
    const gets = draw(20_000, () => ({
      method: 'GET',
      path: `/v1/collections/bench/keys/key-${Math.floor(Math.random() * KEYS)}`,
    }));
    const [bareSet, set, bareGet, get] = await interleaved(
      [
        {
          name: 'bare Fastify route, same set requests',
          options: { url: `http://127.0.0.1:${bare.port}`, headers, requests: sets },
        },
        {
          name: 'kv set (durable, group commit)',
          options: { url: `http://127.0.0.1:${root.internalPort}`, headers, requests: sets },
        },
        {
          name: 'bare Fastify route, same get requests',
          options: { url: `http://127.0.0.1:${bare.port}`, headers, requests: gets },
        },
        { name: 'kv get', options: { url: `http://127.0.0.1:${root.internalPort}`, headers, requests: gets } },
      ],
      { rounds: 2, roundSeconds: DURATION_S / 2, warmupSeconds: 2 },
    );
    report(`kv set (${store}; target >= 5,000/s), 50 connections, ${KEYS} keys`, bareSet!, [set!]);
    report(`kv get (${store}; target >= 10,000/s), 50 connections, ${KEYS} keys`, bareGet!, [get!]);

    // Replication lag: a child of the root, a write at the root, its arrival in the child's feed
    // (the child publishes a command only after applying it: visible there by then).
    const child = await startStratus(
      ['--services', 'kv', '--kv-node-name', 'bench-child', '--kv-parent', `http://127.0.0.1:${root.internalPort}`],
      { DATA_DIR: join(dir, 'child'), DATABASE_URL: database.url },
    );
    children.push(child);
    for (let ready = false; !ready;) {
      ready = (await call(child.internalPort, 'GET', '/readyz')).status === 200;
      if (!ready) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const lag = await replicationLag(root, child);
    const pct = (p: number) => lag[Math.min(lag.length - 1, Math.floor((p / 100) * lag.length))]!;
    console.log(
      `\nkv replication lag (${store}; target p99 <= 100 ms): parent write sent → child applied and passing it on, ${lag.length} sequential writes`,
    );
    console.table([
      { 'p50 ms': pct(50).toFixed(2), 'p99 ms': pct(99).toFixed(2), 'max ms': lag[lag.length - 1]!.toFixed(2) },
    ]);
  } finally {
    for (const child of children.reverse()) await child.stop();
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
