import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import http from 'node:http';
import {
  benchDatabaseUrl,
  flagFailures,
  spawnServer,
  startStratus,
  storeLabel,
  storeOf,
  waitForPorts,
  stopper,
  type Child,
  type LoadResult,
  cpuSeconds,
  combineRounds,
} from './lib.ts';
import { startNginx } from './nginx.ts';
import { recordResult } from './results.ts';
import { wrk, wrkPath, type WrkOptions } from './wrk.ts';

const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP_S = 3;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const CONNECTIONS = 50;
const THREADS = 1;
/** The target for the remote-upstream proxy. */
const PROXY_TARGET = 0.9;

/** bench/node-proxy.ts in a process of its own, forwarding to the upstream's internal port. */
async function startNodeProxy(upstreamPort: number): Promise<Child> {
  const script = fileURLToPath(new URL('./node-proxy.ts', import.meta.url));
  const child = spawnServer(['--import', 'tsx', script, String(upstreamPort)], { stdio: ['ignore', 'pipe', 'pipe'] });
  const match = await waitForPorts(child, /node proxy port (\d+)\n/);
  return { port: Number(match[1]), internalPort: 0, pid: child.pid, stop: stopper(child) };
}

async function startStandalone(service: string, dataDir: string, databaseUrl: string | undefined): Promise<Child> {
  const script = fileURLToPath(new URL('./standalone-service.ts', import.meta.url));
  const child = spawnServer(['--no-node-snapshot', '--import', 'tsx', script, service, dataDir], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, DATABASE_URL: databaseUrl },
  });
  const match = await waitForPorts(child, /standalone port (\d+).*\n/);
  return { port: Number(match[1]), internalPort: 0, store: storeOf(match[0]), stop: stopper(child) };
}

function post(
  port: number,
  host: string,
  path: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        headers: { host, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers },
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

interface Scenario {
  name: string;
  options: Omit<WrkOptions, 'seconds'>;
  /** The proxying process whose CPU time per request is measured over the rounds (Linux /proc). */
  cpuPid?: number;
}

/** A result with, for a scenario that names a process, that process's CPU time per request. */
type Measured = LoadResult & { cpuMicrosPerRequest?: number };

/** nginx's one worker (the master only forks it), by the master's children list. */
function nginxWorker(masterPid: number | undefined): number | undefined {
  if (masterPid === undefined) return undefined;
  try {
    const child = Number(readFileSync(`/proc/${masterPid}/task/${masterPid}/children`, 'utf8').trim().split(' ')[0]);
    return Number.isInteger(child) && child > 0 ? child : undefined;
  } catch {
    return undefined;
  }
}

/**
 * wrk rounds in turn (A B C … A B C) after one warm-up each, so that a shared machine speeding up
 * or slowing down moves every scenario alike; rates are averaged, percentiles are the worst round's.
 */
async function interleavedWrk(binary: string, scenarios: Scenario[]): Promise<Measured[]> {
  for (const s of scenarios) await wrk(binary, 'warm-up', { ...s.options, seconds: WARMUP_S });
  const rounds: LoadResult[][] = scenarios.map(() => []);
  const cpu = scenarios.map(() => ({ seconds: 0, requests: 0, known: true }));
  const seconds = Math.max(1, Math.round(DURATION_S / ROUNDS));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, s] of scenarios.entries()) {
      const before = s.cpuPid === undefined ? undefined : cpuSeconds(s.cpuPid);
      const result = await wrk(binary, s.name, { ...s.options, seconds });
      const after = s.cpuPid === undefined ? undefined : cpuSeconds(s.cpuPid);
      rounds[i]!.push(result);
      if (before === undefined || after === undefined || Number.isNaN(before) || Number.isNaN(after))
        cpu[i]!.known = false;
      else {
        cpu[i]!.seconds += after - before;
        cpu[i]!.requests += result.requestsPerSecond * seconds;
      }
    }
  }
  return rounds.map((results, i) => {
    return {
      ...combineRounds(scenarios[i]!.name, results),
      ...(scenarios[i]!.cpuPid !== undefined && cpu[i]!.known && cpu[i]!.requests > 0
        ? { cpuMicrosPerRequest: Math.round((cpu[i]!.seconds / cpu[i]!.requests) * 1e6) }
        : {}),
    };
  });
}

const round2 = (ms: number) => Math.round(ms * 100) / 100;

/**
 * Gateway benchmark (issues 3 and 26): the config service's GET /version, with wrk (1 thread, 50
 * connections) as the load generator, measured in interleaved rounds:
 *  - the generator's own ceiling: nginx serving a static file;
 *  - the bare config app listening on its own;
 *  - the full platform dispatching in process, anonymous and with an API key;
 *  - nginx (1 worker) reverse-proxying to a `stratus serve --services config` upstream's internal port;
 *  - Stratus's remote-upstream proxy: a front `--services apikeys,auth` with UPSTREAM_CONFIG on that
 *    same upstream process.
 */
export async function run(): Promise<void> {
  const binary = await wrkPath();
  if (!binary) {
    console.error('gateway bench needs wrk as its load generator, and it could not be had');
    process.exitCode = 1;
    return;
  }
  const dirs = [0, 1, 2, 3, 4].map(() => mkdtempSync(join(tmpdir(), 'stratus-bench-')));
  // Each server has a store of its own: a data directory, and with DATABASE_URL a PostgreSQL
  // schema of its own (dropped afterwards).
  const databases: { url: string | undefined; drop(): Promise<void> }[] = [];
  const database = async () => {
    const created = await benchDatabaseUrl();
    databases.push(created);
    return created.url;
  };
  const children: Child[] = [];
  try {
    const bare = await startStandalone('config', dirs[0]!, await database());
    children.push(bare);
    const gateway = await startStratus([], { DATA_DIR: dirs[1], DATABASE_URL: await database() });
    children.push(gateway);
    const upstream = await startStratus(['--services', 'config'], {
      DATA_DIR: dirs[2],
      DATABASE_URL: await database(),
    });
    children.push(upstream);
    const front = await startStratus(['--services', 'apikeys,auth'], {
      DATA_DIR: dirs[3],
      DATABASE_URL: await database(),
      UPSTREAM_CONFIG: `http://127.0.0.1:${upstream.internalPort}`,
    });
    children.push(front);
    // The static page for the generator's ceiling: the same body as /version's answer is about.
    // Readable by nginx's unprivileged worker (mkdtemp makes the folder private).
    const site = dirs[4]!;
    chmodSync(site, 0o755);
    writeFileSync(join(site, 'version'), '0.0.0\n');
    const staticNginx = await startNginx({ root: site });
    if (staticNginx) children.push(staticNginx);
    const proxyNginx = await startNginx({ proxyTo: upstream.internalPort });
    if (proxyNginx) children.push(proxyNginx);
    const nodeProxy = await startNodeProxy(upstream.internalPort);
    children.push(nodeProxy);

    const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'user-bench' } }) };
    const created = await post(gateway.internalPort, 'apikeys.localhost', '/v0/apikeys', '{"name":"bench"}', identity);
    if (created.status !== 201) throw new Error(`creating the bench key answered ${created.status}: ${created.body}`);
    const { key, secret } = JSON.parse(created.body) as { key: string; secret: string };

    // wrk adds its own Host unless the script sets `Host` (capitalised): one Host header only.
    const scenario = (name: string, port: number, headers: Record<string, string> = {}, cpuPid?: number): Scenario => ({
      name,
      cpuPid,
      options: {
        url: `http://127.0.0.1:${port}/version`,
        headers: { Host: 'config.localhost', ...headers },
        connections: CONNECTIONS,
        threads: THREADS,
      },
    });
    const scenarios: Scenario[] = [
      ...(staticNginx ? [scenario(`(g) generator ceiling: ${staticNginx.version} static file`, staticNginx.port)] : []),
      scenario('(a) bare config app, GET /version', bare.port),
      scenario('(b) platform in process, anonymous', gateway.port),
      scenario('(c) platform in process, API key', gateway.port, { 'api-key': key, 'api-secret': secret }),
      ...(proxyNginx
        ? [scenario(`(n) ${proxyNginx.version} proxy → upstream`, proxyNginx.port, {}, nginxWorker(proxyNginx.pid))]
        : []),
      scenario('(m) bare node:http proxy → upstream', nodeProxy.port, {}, nodeProxy.pid),
      scenario('(d) Stratus front → remote upstream', front.port, {}, front.pid),
    ];
    const results = await interleavedWrk(binary, scenarios);
    const byTag = (tag: string) => results.find((r) => r.name.startsWith(`(${tag})`));
    const ceiling = byTag('g');
    const a = byTag('a')!;
    const nginx = byTag('n');
    const remote = byTag('d')!;
    const nodeFloor = byTag('m')!;

    console.log(
      `\ngateway benchmark (store ${storeLabel(bare, gateway, upstream, front)}; wrk -t${THREADS} -c${CONNECTIONS}, ${DURATION_S} s each in ${ROUNDS} interleaved rounds; ratios to (a))`,
    );
    console.table(
      results.map((r) => ({
        scenario: r.name,
        'req/s': Math.round(r.requestsPerSecond),
        'p50 ms': r.p50,
        'p99 ms': r.p99,
        'errors+non2xx': r.errors + r.non2xx,
        'ratio to (a)': (r.requestsPerSecond / a.requestsPerSecond).toFixed(3),
        'proxy CPU µs/req': (r as Measured).cpuMicrosPerRequest ?? '',
        ...(nginx ? { 'ratio to nginx proxy': (r.requestsPerSecond / nginx.requestsPerSecond).toFixed(3) } : {}),
      })),
    );
    const invalid = flagFailures(results);
    if (invalid) return;

    if (ceiling) {
      const busiest = Math.max(...results.filter((r) => r !== ceiling).map((r) => r.requestsPerSecond));
      recordResult({
        bench: 'gateway',
        path: `load generator ceiling (wrk -t${THREADS} -c${CONNECTIONS}, nginx static file)`,
        figure: Math.round(ceiling.requestsPerSecond),
        unit: 'req/s',
        p50: ceiling.p50,
        p99: ceiling.p99,
        note: `${(ceiling.requestsPerSecond / busiest).toFixed(1)}× the fastest scenario measured: the generator is ${ceiling.requestsPerSecond > 1.2 * busiest ? 'not' : 'close to being'} the bottleneck`,
      });
    } else {
      console.log('load generator ceiling not measured: nginx could not be had');
    }

    const peerOf = (r: LoadResult, name: string) => ({
      name,
      figure: Math.round(r.requestsPerSecond),
      p50: r.p50,
      p99: r.p99,
    });
    for (const tag of ['b', 'c']) {
      const r = byTag(tag)!;
      recordResult({
        bench: 'gateway',
        path: `in-process dispatch, GET /version, ${tag === 'b' ? 'anonymous' : 'API key'}`,
        figure: Math.round(r.requestsPerSecond),
        unit: 'req/s',
        p50: r.p50,
        p99: r.p99,
        peer: peerOf(a, 'bare config service process'),
        note: 'informational: what routing, authentication and header rewriting cost over the bare service',
      });
    }

    // At a fixed 50 connections latency is the inverse of throughput (Little's law), so "at equal
    // p99" is read as: the rate within 0.9× and p99 no worse than that same proportion allows.
    const row = {
      bench: 'gateway',
      path: 'remote-upstream proxy, GET /version',
      figure: Math.round(remote.requestsPerSecond),
      unit: 'req/s',
      p50: remote.p50,
      p99: remote.p99,
      target: `≥ ${PROXY_TARGET}× nginx at equal p99`,
    };
    if (nginx) {
      const met =
        remote.requestsPerSecond >= PROXY_TARGET * nginx.requestsPerSecond && remote.p99 <= nginx.p99 / PROXY_TARGET;
      const nginxPeer = peerOf(nginx, `${proxyNginx!.version} (1 worker) reverse proxy`);
      recordResult({
        ...row,
        peer: nginxPeer,
        met,
        ...(met ? {} : { note: gapNote(remote as Measured, nginx as Measured, nodeFloor as Measured) }),
      });
      recordResult({
        bench: 'gateway',
        path: "bare node:http reverse proxy (Node's floor for a proxy), GET /version",
        figure: Math.round(nodeFloor.requestsPerSecond),
        unit: 'req/s',
        p50: nodeFloor.p50,
        p99: nodeFloor.p99,
        peer: nginxPeer,
        note: `informational: node:http server and keep-alive agent, no gateway work${cpuText(nodeFloor as Measured)}`,
      });
      console.log(
        `remote upstream / nginx proxy: ${(remote.requestsPerSecond / nginx.requestsPerSecond).toFixed(2)}× (p99 ${round2(remote.p99)} vs ${round2(nginx.p99)} ms)`,
      );
    } else {
      recordResult({ ...row, peerSkipped: 'nginx could not be had' });
    }
  } finally {
    for (const child of children.reverse()) await child.stop();
    for (const created of databases) await created.drop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}

const cpuText = (r: Measured) =>
  r.cpuMicrosPerRequest === undefined ? '' : `; ${r.cpuMicrosPerRequest} µs CPU per request`;

/**
 * Why the target is missed, from the front's profiles (perf and --cpu-prof): the front spends
 * several times nginx's CPU per proxied request, spread over Node's HTTP server, the gateway's
 * pipeline, V8 (GC, property access) and the kernel's loopback TCP, with no single hotspot left;
 * on a 2-core machine wrk, the proxy and the upstream share the CPU, so the rate follows that
 * cost. The bare node:http proxy beside it shows how much of the gap Node's own HTTP stack takes
 * before any gateway work. The figures are this run's.
 */
function gapNote(remote: Measured, nginx: Measured, nodeFloor: Measured): string {
  const cost =
    remote.cpuMicrosPerRequest !== undefined && nginx.cpuMicrosPerRequest !== undefined
      ? `the front used ${remote.cpuMicrosPerRequest} µs CPU per request, nginx's worker ${nginx.cpuMicrosPerRequest} µs`
      : "the front's CPU per request is several times nginx's";
  const floor = `a bare node:http proxy reached ${(nodeFloor.requestsPerSecond / nginx.requestsPerSecond).toFixed(2)}× nginx${cpuText(nodeFloor)}`;
  return `${cost}; ${floor} (profile: Node's HTTP server, the gateway pipeline, V8 and loopback TCP, no single hotspot); on 2 cores the proxy's CPU is taken from the upstream's`;
}
