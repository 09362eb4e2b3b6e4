import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import pg from 'pg';

/**
 * BENCH_PIN=1 runs the load generator on the last CPU only, servers free to use every CPU (needs
 * two or more and `taskset`). It steadied the gateway benchmark here but slowed the config
 * benchmark's server badly, so it is opt-in; without it the scheduler decides, and figures on a
 * 2-core machine swing by up to a third from run to run (rounds are interleaved to compensate).
 */
const CPUS = availableParallelism();
const PINNED = (() => {
  if (CPUS < 2 || !process.env.BENCH_PIN) return false;
  try {
    execFileSync('taskset', ['-p', '-c', String(CPUS - 1), String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** Spawns a server process, free to use every CPU (children would inherit the generator's one). */
export function spawnServer(args: string[], options: Parameters<typeof spawn>[2]): ChildProcess {
  return PINNED
    ? spawn('taskset', ['-c', `0-${CPUS - 1}`, process.execPath, ...args], options)
    : spawn(process.execPath, args, options);
}

export interface LoadResult {
  name: string;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  /** The non-2xx answers by status code ("429" → count), and the errors by code or message ("ECONNRESET", "request timed out"). */
  statuses?: Record<string, number>;
}

export type AutocannonOptions = autocannon.Options;

/**
 * autocannon builds every request of `requests` in every connection's client, synchronously,
 * before the run starts: 50 connections × a pool of 20,000 requests blocked this process for tens
 * of seconds on a busy 2-core machine, long enough for the first clients' 10 s request timers to
 * fire (dozens of spurious timeouts per run, and latencies that counted the setup). Instead each
 * connection gets its own share of the pool (every request built once, and the connections do not
 * all send the same sequence).
 */
function sharePool(options: AutocannonOptions): AutocannonOptions {
  const { requests } = options;
  const connections = options.connections ?? 50;
  if (!requests || requests.length <= connections || options.setupClient || requests.some((r) => r.setupRequest))
    return options;
  const shares = Array.from({ length: connections }, (_, i) => requests.filter((_r, j) => j % connections === i));
  let next = 0;
  return {
    ...options,
    requests: [requests[0]!],
    setupClient: (client) => client.setRequests(shares[next++ % connections]!),
  };
}

/** Runs autocannon against loopback for a bounded time and summarises it. */
export async function load(name: string, options: AutocannonOptions): Promise<LoadResult> {
  const statuses: Record<string, number> = {};
  const count = (what: string) => (statuses[what] = (statuses[what] ?? 0) + 1);
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      sharePool({ connections: 50, duration: 10, ...options }),
      (error: Error | null, finished: autocannon.Result) => (error ? reject(error) : resolve(finished)),
    );
    instance.on('reqError', (error: unknown) =>
      count(
        String((error as NodeJS.ErrnoException | undefined)?.code ?? (error as Error | undefined)?.message ?? error),
      ),
    );
  });
  return {
    name,
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    // autocannon counts a timeout in `errors` too.
    errors: result.errors,
    non2xx: result.non2xx,
    statuses: { ...non2xxStatuses(result.statusCodeStats), ...statuses },
  };
}

function non2xxStatuses(stats: Record<string, { count?: number }> | undefined): Record<string, number> {
  const statuses: Record<string, number> = {};
  for (const [code, stat] of Object.entries(stats ?? {})) {
    if (!code.startsWith('2') && (stat.count ?? 0) > 0) statuses[code] = stat.count ?? 0;
  }
  return statuses;
}

function addStatuses(results: LoadResult[]): Record<string, number> {
  const statuses: Record<string, number> = {};
  for (const r of results)
    for (const [code, n] of Object.entries(r.statuses ?? {})) statuses[code] = (statuses[code] ?? 0) + n;
  return statuses;
}

/**
 * Says loudly which results had transport errors, timeouts or non-2xx answers, and makes the
 * benchmark exit with status 1: autocannon counts every answer in its req/s, so a scenario that
 * answered 429 (or any error) measured how fast the server refuses, not its throughput.
 * Returns whether any did.
 */
export function flagFailures(results: Pick<LoadResult, 'name' | 'errors' | 'non2xx' | 'statuses'>[]): boolean {
  let failed = false;
  for (const r of results) {
    if (r.errors + r.non2xx === 0) continue;
    failed = true;
    const codes = Object.entries(r.statuses ?? {})
      .map(([code, n]) => `${n} × ${code}`)
      .join(', ');
    console.error(
      `BENCH INVALID: "${r.name}": ${r.non2xx} answers other than the expected 2xx${codes ? ` (${codes})` : ''}, ${r.errors} errors/timeouts; its rate counts them and is not throughput`,
    );
  }
  if (failed) process.exitCode = 1;
  return failed;
}

/**
 * Runs several scenarios in alternating rounds (A B C A B C …) after one warm-up each, so that a
 * machine that speeds up or slows down during the run moves every scenario alike, and averages
 * their rounds. Ratios between scenarios measured this way are far steadier than back to back.
 */
export async function interleaved(
  scenarios: { name: string; options: AutocannonOptions }[],
  options: { rounds: number; roundSeconds: number; warmupSeconds: number },
): Promise<LoadResult[]> {
  for (const scenario of scenarios) await load('warm-up', { ...scenario.options, duration: options.warmupSeconds });
  const rounds: LoadResult[][] = scenarios.map(() => []);
  for (let round = 0; round < options.rounds; round++) {
    for (const [i, scenario] of scenarios.entries())
      rounds[i]!.push(await load(scenario.name, { ...scenario.options, duration: options.roundSeconds }));
  }
  return rounds.map((results, i) => combineRounds(scenarios[i]!.name, results));
}

/**
 * One scenario's interleaved rounds as one result: the mean rate, the worst percentiles (a round
 * that stalled shows), and every error and non-2xx answer counted.
 */
export function combineRounds(name: string, results: LoadResult[]): LoadResult {
  return {
    name,
    requestsPerSecond: results.reduce((sum, r) => sum + r.requestsPerSecond, 0) / results.length,
    p50: Math.max(...results.map((r) => r.p50)),
    p99: Math.max(...results.map((r) => r.p99)),
    errors: results.reduce((n, r) => n + r.errors, 0),
    non2xx: results.reduce((n, r) => n + r.non2xx, 0),
    statuses: addStatuses(results),
  };
}

/**
 * Prints the figures beside the baseline measured in the same run, with each ratio; any errors or
 * non-2xx answers are flagged (see flagFailures) and fail the run.
 */
export function report(title: string, baseline: LoadResult, results: LoadResult[]): void {
  const rows = [baseline, ...results].map((r) => ({
    scenario: r.name,
    'req/s': Math.round(r.requestsPerSecond),
    'p50 ms': r.p50,
    'p99 ms': r.p99,
    'errors+non2xx': r.errors + r.non2xx,
    'ratio to baseline': (r.requestsPerSecond / baseline.requestsPerSecond).toFixed(3),
  }));
  console.log(`\n${title}${PINNED ? ` — load generator on CPU ${CPUS - 1}` : ''}`);
  console.table(rows);
  flagFailures([baseline, ...results]);
}

/**
 * The server under test: this checkout's, or with BENCH_TREE=<another checkout> (its dependencies
 * installed) that one's, driven by this checkout's benchmark, so two builds are compared under the
 * same load generator (a change of the generator moves the figures on a 2-core machine too).
 */
const CLI = process.env.BENCH_TREE
  ? join(process.env.BENCH_TREE, 'src/cli.ts')
  : fileURLToPath(new URL('../src/cli.ts', import.meta.url));

/** The store a server process reported in its ready line. */
export type StoreKind = 'PostgreSQL' | 'SQLite' | 'unknown';

export interface Child {
  readonly port: number;
  readonly internalPort: number;
  /** For `stratus serve` (and the standalone service): the store it says it runs on. */
  readonly store?: StoreKind;
  /** The server's process id (for its RSS). */
  readonly pid?: number;
  stop(): Promise<void>;
}

/** The store named in a ready line (`…; store PostgreSQL; …` or `…; store SQLite in <dir>; …`). */
export function storeOf(readyLine: string): StoreKind {
  const match = /\bstore (PostgreSQL|SQLite)\b/.exec(readyLine);
  return match ? (match[1] as StoreKind) : 'unknown';
}

/** The label of the stores some servers ran on: one name, or each distinct one. */
export function storeLabel(...children: Pick<Child, 'store'>[]): string {
  const stores = [...new Set(children.map((child) => child.store ?? 'unknown'))];
  return stores.length === 1 ? stores[0]! : stores.join(' + ');
}

export function waitForPorts(child: ChildProcess, pattern: RegExp): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`no ready line in 60 s:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = pattern.exec(output);
      if (match) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        // Keep draining: a child whose stdout pipe fills up would stall on its next log line.
        child.stdout?.on('data', (more: Buffer) => {
          if (process.env.BENCH_VERBOSE) process.stderr.write(more);
        });
        resolve(match);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => reject(new Error(`exited with ${code}:\n${output}`)));
  });
}

export function stopper(child: ChildProcess): () => Promise<void> {
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  return () =>
    new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
      setTimeout(kill, 5_000).unref();
      process.off('exit', kill);
    });
}

/** `stratus serve` in its own process, so the load generator does not share its event loop. */
export async function startStratus(args: string[], env: Record<string, string | undefined>): Promise<Child> {
  // BENCH_PROFILE=<dir> writes a CPU profile of the server there when it stops.
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  const child = spawnServer(
    [
      '--no-node-snapshot',
      ...profile,
      '--import',
      'tsx',
      CLI,
      'serve',
      '--port',
      '0',
      '--internal-port',
      '0',
      '--host',
      '127.0.0.1',
      ...args,
    ],
    {
      env: { ...process.env, LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const match = await waitForPorts(child, /public port (\d+) .*internal port (\d+).*\n/);
  return {
    port: Number(match[1]),
    internalPort: Number(match[2]),
    store: storeOf(match[0]),
    pid: child.pid!,
    stop: stopper(child),
  };
}

/** The baseline: a bare `node:http` server answering a fixed JSON body, in its own process. */
export async function startBareServer(body: string): Promise<Child> {
  const script = `
    const http = require('node:http');
    const body = ${JSON.stringify(body)};
    const length = Buffer.byteLength(body);
    const server = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': length });
      res.end(body);
    });
    server.listen(0, '127.0.0.1', () => console.log('bare port ' + server.address().port));
    process.on('SIGTERM', () => process.exit(0));
  `;
  const child = spawnServer(
    [...(process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : []), '-e', script],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const match = await waitForPorts(child, /bare port (\d+)/);
  return { port: Number(match[1]), internalPort: 0, stop: stopper(child) };
}

/** A baseline: a bare Fastify app answering every method and path with a fixed JSON body. */
export async function startBareFastify(body: string): Promise<Child> {
  const script = `
    const fastify = require('fastify')();
    const body = ${JSON.stringify(body)};
    fastify.all('/*', async (request, reply) => reply.type('application/json').send(body));
    fastify.listen({ port: 0, host: '127.0.0.1' }).then(() => console.log('bare port ' + fastify.server.address().port));
    process.on('SIGTERM', () => process.exit(0));
  `;
  const child = spawnServer(['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  const match = await waitForPorts(child, /bare port (\d+)/);
  return { port: Number(match[1]), internalPort: 0, stop: stopper(child) };
}

/**
 * A PostgreSQL schema of its own for one benchmark run (dropped by `drop`), so runs neither see
 * nor leave data in the database DATABASE_URL names. Without DATABASE_URL: the embedded store.
 */
export async function benchDatabaseUrl(): Promise<{ url: string | undefined; drop(): Promise<void> }> {
  const base = process.env.DATABASE_URL;
  if (!base) return { url: undefined, drop: async () => {} };
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const run = async (statement: string) => {
    const client = new pg.Client({ connectionString: base });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await run(`create schema ${schema}`);
  const url = new URL(base);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return { url: url.toString(), drop: () => run(`drop schema ${schema} cascade`) };
}

/**
 * CPU seconds (user + system) a process has used so far, all its threads, or with `thread` one
 * thread's (`pid` itself: the main thread, a Node server's event loop); NaN where /proc cannot
 * tell (not Linux, or the process is gone). On a shared machine wall-clock rates swing with the
 * neighbours; what the server spent per request does not.
 */
export function cpuSeconds(pid: number | undefined, thread?: number): number {
  try {
    const path = thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`;
    const fields = readFileSync(path, 'utf8').split(') ')[1]!.split(' ');
    // utime and stime, fields 14 and 15 of stat(5), in clock ticks (100 a second on Linux).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

/** A process's resident memory in bytes (`VmRSS`), or another field of /proc/<pid>/status in kB. */
export async function rssOf(pid: number, field = 'VmRSS'): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
}
