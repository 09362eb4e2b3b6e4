import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import http from 'node:http';
import {
  benchDatabaseUrl,
  interleaved,
  report,
  spawnServer,
  startStratus,
  storeLabel,
  storeOf,
  waitForPorts,
  stopper,
  type Child,
} from './lib.ts';

const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP_S = 3;
const ROUNDS = 2;

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

/**
 * Gateway benchmark (issue 3): one trivial route — the config service's GET /version — served
 * (a) by the bare service app listening directly, (b) through the gateway anonymously, (c) through
 * the gateway with an API key, (d) through a gateway whose config service is a remote upstream.
 */
export async function run(): Promise<void> {
  const dirs = [0, 1, 2].map(() => mkdtempSync(join(tmpdir(), 'stratus-bench-')));
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
      DATA_DIR: dirs[1] + '-front',
      DATABASE_URL: await database(),
      UPSTREAM_CONFIG: `http://127.0.0.1:${upstream.internalPort}`,
    });
    children.push(front);

    const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'user-bench' } }) };
    const created = await post(gateway.internalPort, 'apikeys.localhost', '/v0/apikeys', '{"name":"bench"}', identity);
    if (created.status !== 201) throw new Error(`creating the bench key answered ${created.status}: ${created.body}`);
    const { key, secret } = JSON.parse(created.body) as { key: string; secret: string };

    const scenario = (name: string, port: number, headers: Record<string, string>) => ({
      name,
      options: { url: `http://127.0.0.1:${port}/version`, headers: { host: 'config.localhost', ...headers } },
    });
    const [a, ...rest] = await interleaved(
      [
        scenario('(a) bare config app, GET /version', bare.port, {}),
        scenario('(b) via gateway, anonymous', gateway.port, {}),
        scenario('(c) via gateway, API key', gateway.port, { 'api-key': key, 'api-secret': secret }),
        scenario('(d) via gateway to a remote upstream', front.port, {}),
      ],
      { rounds: ROUNDS, roundSeconds: DURATION_S / ROUNDS, warmupSeconds: WARMUP_S },
    );
    report(
      `gateway benchmark (store ${storeLabel(...children)}, 50 connections, ${DURATION_S} s each in ${ROUNDS} interleaved rounds, ratios to (a))`,
      a!,
      rest,
    );
  } finally {
    for (const child of children.reverse()) await child.stop();
    for (const created of databases) await created.drop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    rmSync(dirs[1] + '-front', { recursive: true, force: true });
  }
}
