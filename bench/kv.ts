import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import {
  benchDatabaseUrl,
  flagFailures,
  startBareFastify,
  startStratus,
  stopper,
  type Child,
  type LoadResult,
  combineRounds,
} from './lib.ts';
import { freePort } from './nginx.ts';
import { debianPeer, versionOf } from './peers.ts';
import { recordResult } from './results.ts';
import { wrk, wrkPath } from './wrk.ts';

// `npm run bench -- kv`: on one `stratus serve` (services kv and config), through its internal
// port (the trusted network, presence-only auth), kv set and get, and a config read as the
// baseline for a single-row read on the same path, beside etcd (Debian's etcd-server, through its
// HTTP JSON gateway) put and range and a bare Fastify route, all driven by wrk at the same
// connection count in interleaved rounds; then the replication lag from a write acknowledged by a
// parent to its arrival at a child.
//
// The load generator is wrk (one thread), not autocannon: autocannon in Node topped out near the
// config read's rate on this 2-core machine and took the server's CPU, where wrk needs a fraction
// of a core for the same rate.
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const ROUNDS = 2;
const CONNECTIONS = 50;
const KEYS = 10_000;
/** Requests in each scenario's pool (random keys, drawn before the run). */
const POOL = 10_000;
const LAG_SAMPLES = 500;
const HOST = 'kv.localhost';
const CONFIG_HOST = 'config.localhost';
const IDENTITY = JSON.stringify({ user: { id: 'bench' } });
const identity = { 'x-gateway-authentication': IDENTITY };
/** Why a target was missed, from CPU profiles of the server (BENCH_PROFILE) under these loads. */
const SET_NOTE =
  "the SQLite group commit's fsync runs on the event loop (store/sql/sqlite.ts flush: about a third of a set-only profile), where etcd fsyncs its WAL off its request path";
const GET_NOTE =
  'both are cache hits; the rest is per request: the wildcard key route, the presence hook, and the project and key taken from the request';

function call(
  port: number,
  method: string,
  path: string,
  body?: string,
  host = HOST,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: { host, 'content-type': 'application/json', ...identity },
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

/** Runs `make(i)` for i in [0, count), `width` at a time. */
async function seed(count: number, width: number, make: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < count) await make(next++);
    }),
  );
}

const b64 = (text: string) => Buffer.from(text).toString('base64');
const randomKey = () => Math.floor(Math.random() * KEYS);
const valueOf = (i: number) => `{"n":${i},"name":"user ${i}"}`;

interface PoolRequest {
  method: string;
  path: string;
  body?: string;
}

interface Scenario {
  name: string;
  url: string;
  headers: Record<string, string>;
  requests: PoolRequest[];
}

/** One wrk run cycling through the scenario's pool of requests (random keys). */
function wrkPool(binary: string, scenario: Scenario, seconds: number): Promise<LoadResult> {
  return wrk(binary, scenario.name, {
    url: scenario.url,
    headers: scenario.headers,
    requests: scenario.requests,
    connections: CONNECTIONS,
    seconds,
  });
}

/** Scenarios in alternating rounds after one warm-up each (lib.ts `interleaved`, with wrk). */
async function interleavedWrk(binary: string, scenarios: Scenario[]): Promise<LoadResult[]> {
  for (const scenario of scenarios) await wrkPool(binary, scenario, 1);
  const rounds: LoadResult[][] = scenarios.map(() => []);
  for (let round = 0; round < ROUNDS; round++)
    for (const [i, scenario] of scenarios.entries())
      rounds[i]!.push(await wrkPool(binary, scenario, DURATION_S / ROUNDS));
  return rounds.map((results, i) => combineRounds(scenarios[i]!.name, results));
}

function table(title: string, results: LoadResult[], baseline: LoadResult): void {
  console.log(`\n${title}`);
  console.table(
    results.map((r) => ({
      scenario: r.name,
      'req/s': Math.round(r.requestsPerSecond),
      'p50 ms': r.p50,
      'p99 ms': r.p99,
      'errors+non2xx': r.errors + r.non2xx,
      [`ratio to ${baseline.name}`]: (r.requestsPerSecond / baseline.requestsPerSecond).toFixed(3),
    })),
  );
}

/**
 * etcd (Debian's etcd-server) as a one-member cluster in a temporary data dir on free loopback
 * ports; undefined (with a line saying why) when it cannot be had. Its WAL is fsynced on every
 * commit, as a kv set is before it is answered.
 */
async function startEtcd(): Promise<(Child & { version: string }) | undefined> {
  const binary = await debianPeer('etcd-server', 'etcd');
  if (!binary) return undefined;
  const dir = mkdtempSync(join(tmpdir(), 'stratus-etcd-'));
  const [port, peerPort] = [await freePort(), await freePort()];
  const name = `bench-${randomBytes(4).toString('hex')}`;
  const child = spawn(
    binary,
    [
      '--name',
      name,
      '--data-dir',
      join(dir, 'data'),
      '--listen-client-urls',
      `http://127.0.0.1:${port}`,
      '--advertise-client-urls',
      `http://127.0.0.1:${port}`,
      '--listen-peer-urls',
      `http://127.0.0.1:${peerPort}`,
      '--initial-advertise-peer-urls',
      `http://127.0.0.1:${peerPort}`,
      '--initial-cluster',
      `${name}=http://127.0.0.1:${peerPort}`,
      '--initial-cluster-state',
      'new',
      '--logger',
      'zap',
      '--log-level',
      'error',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let output = '';
  child.stderr.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));
  const stop = stopper(child);
  const cleanup = async () => {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  };
  // Up once a put through the gateway answers 200.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const answer = await etcdCall(port, '/v3/kv/put', { key: b64('ready'), value: b64('1') }).catch(() => undefined);
    if (answer?.status === 200) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      await cleanup();
      console.log(`peer etcd-server skipped: it did not start on port ${port}\n${output}`);
      return undefined;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    port,
    internalPort: 0,
    pid: child.pid!,
    version: versionOf(binary, ['--version']).replace(/^etcd Version: /, ''),
    stop: cleanup,
  };
}

function etcdCall(port: number, path: string, body: object): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
      },
      (res) => {
        let answer = '';
        res.on('data', (chunk: Buffer) => (answer += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: answer }));
      },
    );
    req.on('error', reject);
    req.end(text);
  });
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
  const wrk = await wrkPath();
  if (!wrk) throw new Error('the kv bench needs wrk (Debian package wrk)');
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-kv-'));
  // The platform's own store: a schema of its own on PostgreSQL (DATABASE_URL), dropped afterwards.
  const database = await benchDatabaseUrl();
  // The child is another node: on PostgreSQL a schema of its own (instances on one database are one node).
  const childDatabase = await benchDatabaseUrl();
  const children: Child[] = [];
  try {
    // The node keeps its data in the platform store: SQLite in DATA_DIR, or PostgreSQL with DATABASE_URL.
    const root = await startStratus(['--services', 'kv,config', '--kv-node-name', 'bench-root'], {
      DATA_DIR: join(dir, 'root'),
      DATABASE_URL: database.url,
    });
    children.push(root);
    const store = `store: ${root.store}`;
    const created = await call(root.internalPort, 'POST', '/v1/collections', '{"name":"bench"}');
    if (created.status !== 200) throw new Error(`creating the collection answered ${created.status}: ${created.text}`);
    await seed(KEYS, 100, async (i) => {
      const answer = await call(
        root.internalPort,
        'POST',
        `/v1/collections/bench/keys/key-${i}`,
        `{"value":${valueOf(i)}}`,
      );
      if (answer.status !== 200) throw new Error(`seeding key-${i} answered ${answer.status}: ${answer.text}`);
    });
    // The baseline for a kv get: a config object of the same size class, read on the same port.
    await seed(KEYS, 100, async (i) => {
      const body = JSON.stringify({ id: `cfg-${i}`, entries: { n: i, name: `user ${i}` } });
      const answer = await call(root.internalPort, 'POST', '/v0/configs', body, CONFIG_HOST);
      if (answer.status !== 201) throw new Error(`seeding cfg-${i} answered ${answer.status}: ${answer.text}`);
    });
    const sample = (await call(root.internalPort, 'GET', '/v1/collections/bench/keys/key-42')).text;
    const bare = await startBareFastify(sample);
    children.push(bare);
    const etcd = await startEtcd();
    if (etcd) {
      children.push(etcd);
      await seed(KEYS, 100, async (i) => {
        const answer = await etcdCall(etcd.port, '/v3/kv/put', { key: b64(`key-${i}`), value: b64(valueOf(i)) });
        if (answer.status !== 200) throw new Error(`seeding etcd key-${i} answered ${answer.status}: ${answer.text}`);
      });
    }

    const headers = { host: HOST, 'content-type': 'application/json', ...identity };
    const sets = Array.from({ length: POOL }, (_, i) => ({
      method: 'POST',
      path: `/v1/collections/bench/keys/key-${randomKey()}`,
      body: `{"value":${valueOf(i)}}`,
    }));
    const gets = Array.from({ length: POOL }, () => ({
      method: 'GET',
      path: `/v1/collections/bench/keys/key-${randomKey()}`,
    }));
    const configReads = Array.from({ length: POOL }, () => ({ method: 'GET', path: `/v0/configs/cfg-${randomKey()}` }));
    const puts = Array.from({ length: POOL }, (_, i) => ({
      method: 'POST',
      path: '/v3/kv/put',
      body: JSON.stringify({ key: b64(`key-${randomKey()}`), value: b64(valueOf(i)) }),
    }));
    const ranges = Array.from({ length: POOL }, () => ({
      method: 'POST',
      path: '/v3/kv/range',
      body: JSON.stringify({ key: b64(`key-${randomKey()}`) }),
    }));
    const stratusUrl = `http://127.0.0.1:${root.internalPort}`;
    const etcdHeaders = { 'content-type': 'application/json' };
    const scenarios: Scenario[] = [
      { name: 'bare Fastify, same set requests', url: `http://127.0.0.1:${bare.port}`, headers, requests: sets },
      { name: 'kv set (durable, group commit)', url: stratusUrl, headers, requests: sets },
      ...(etcd
        ? [
            {
              name: `etcd ${etcd.version} put`,
              url: `http://127.0.0.1:${etcd.port}`,
              headers: etcdHeaders,
              requests: puts,
            },
          ]
        : []),
      { name: 'bare Fastify, same get requests', url: `http://127.0.0.1:${bare.port}`, headers, requests: gets },
      { name: 'kv get', url: stratusUrl, headers, requests: gets },
      {
        name: 'config read (GET /v0/configs/:id)',
        url: stratusUrl,
        headers: { ...headers, host: CONFIG_HOST },
        requests: configReads,
      },
      ...(etcd
        ? [
            {
              name: `etcd ${etcd.version} range`,
              url: `http://127.0.0.1:${etcd.port}`,
              headers: etcdHeaders,
              requests: ranges,
            },
          ]
        : []),
    ];
    const results = await interleavedWrk(wrk, scenarios);
    const by = (prefix: string) => results.find((r) => r.name.startsWith(prefix));
    const [bareSet, set, put, bareGet, get, config, range] = [
      by('bare Fastify, same set')!,
      by('kv set')!,
      etcd ? by(`etcd ${etcd.version} put`) : undefined,
      by('bare Fastify, same get')!,
      by('kv get')!,
      by('config read')!,
      etcd ? by(`etcd ${etcd.version} range`) : undefined,
    ];
    const shape = `wrk 1 thread, ${CONNECTIONS} connections, ${KEYS} keys, ${ROUNDS} interleaved rounds of ${DURATION_S / ROUNDS} s`;
    table(`kv set (${store}), ${shape}`, [bareSet, set, ...(put ? [put] : [])], bareSet);
    table(`kv get (${store}), ${shape}`, [bareGet, get, config, ...(range ? [range] : [])], bareGet);
    flagFailures(results);

    const peerOf = (r: LoadResult, name: string) => ({ name, figure: r.requestsPerSecond, p50: r.p50, p99: r.p99 });
    const row = { bench: 'kv', unit: 'req/s' };
    recordResult({
      ...row,
      path: `kv set, POST /v1/collections/:col/keys/:key, durable (${store}), internal port`,
      figure: set.requestsPerSecond,
      p50: set.p50,
      p99: set.p99,
      target: '≥ 1.5× etcd put',
      ...(put && etcd
        ? {
            peer: peerOf(put, `etcd ${etcd.version} put (HTTP JSON gateway, WAL fsync)`),
            met: set.requestsPerSecond >= 1.5 * put.requestsPerSecond,
            ...(set.requestsPerSecond >= 1.5 * put.requestsPerSecond ? {} : { note: SET_NOTE }),
          }
        : { peerSkipped: 'etcd-server not available' }),
    });
    recordResult({
      ...row,
      path: `kv get, GET /v1/collections/:col/keys/:key (${store}), internal port`,
      figure: get.requestsPerSecond,
      p50: get.p50,
      p99: get.p99,
      peer: peerOf(config, 'config read, GET /v0/configs/:id, same port'),
      target: '≥ 0.9× config read',
      met: get.requestsPerSecond >= 0.9 * config.requestsPerSecond,
      ...(get.requestsPerSecond >= 0.9 * config.requestsPerSecond ? {} : { note: GET_NOTE }),
    });
    recordResult({
      ...row,
      path: `kv get, GET /v1/collections/:col/keys/:key (${store}), internal port`,
      figure: get.requestsPerSecond,
      p50: get.p50,
      p99: get.p99,
      ...(range && etcd
        ? { peer: peerOf(range, `etcd ${etcd.version} range (HTTP JSON gateway)`) }
        : { peerSkipped: 'etcd-server not available' }),
      note: 'informational: no target against etcd range',
    });

    // Replication lag: a child of the root, a write at the root, its arrival in the child's feed
    // (the child publishes a command only after applying it: visible there by then).
    const child = await startStratus(
      ['--services', 'kv', '--kv-node-name', 'bench-child', '--kv-parent', `http://127.0.0.1:${root.internalPort}`],
      { DATA_DIR: join(dir, 'child'), DATABASE_URL: childDatabase.url },
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
    recordResult({
      bench: 'kv',
      path: `kv replication lag p99, parent write → child applied (${store}), ${lag.length} sequential writes`,
      figure: Number(pct(99).toFixed(2)),
      unit: 'ms',
      lowerIsBetter: true,
      p50: Number(pct(50).toFixed(2)),
      p99: Number(pct(99).toFixed(2)),
      target: 'p99 ≤ 100 ms',
      met: pct(99) <= 100,
    });
  } finally {
    for (const child of children.reverse()) await child.stop();
    await database.drop();
    await childDatabase.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
