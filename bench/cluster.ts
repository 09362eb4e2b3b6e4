import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import type { ChildProcess } from 'node:child_process';
import type autocannon from 'autocannon';
import { benchDatabaseUrl, interleaved, report, startStratus, storeLabel, type Child } from './lib.ts';
import { freePort, installHaproxy, startHaproxy, stopHaproxy, waitForServersUp } from '../test/cluster/haproxy.ts';

const INSTANCES = 3;
const CONFIGS = 2_000;
const KEYS = 2_000;
const DOCUMENTS = 200;
const POOL = 20_000;
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP_S = 5;
const ROUNDS = 2;
const ADMIN = { email: 'bench@cluster.test', password: 'bench cluster password' };

interface Answer {
  status: number;
  text: string;
}

function call(
  port: number,
  agent: http.Agent,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        agent,
        headers: { ...headers, ...(body === undefined ? {} : { 'content-length': Buffer.byteLength(body) }) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function expect(answer: Promise<Answer>, status: number, what: string): Promise<Answer> {
  const got = await answer;
  if (got.status !== status) throw new Error(`${what} answered ${got.status}: ${got.text.slice(0, 300)}`);
  return got;
}

/** Runs `work(i)` for i in [0, count) on 32 parallel clients. */
async function parallel(count: number, work: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < count) await work(next++);
    }),
  );
}

/**
 * The mixed workload, drawn before the run (see bench/config.ts): 40 % config reads, 10 % config
 * patches, 25 % kv gets, 10 % kv sets, 15 % docdb finds; 20 % writes in all.
 */
function mixedRequests(auth: Record<string, string>, databaseId: string): autocannon.Request[] {
  const pick = (n: number) => Math.floor(Math.random() * n);
  const json = { 'content-type': 'application/json' };
  return Array.from({ length: POOL }, (_, i): autocannon.Request => {
    const slot = i % 20;
    if (slot < 8)
      return { method: 'GET', path: `/v0/configs/cfg-${pick(CONFIGS)}`, headers: { host: 'config.localhost' } };
    if (slot < 10)
      return {
        method: 'PATCH',
        path: `/v0/configs/cfg-${pick(CONFIGS)}`,
        headers: { host: 'config.localhost', ...json },
        body: JSON.stringify({ 'limits.rps': i, 'bench.touched': true }),
      };
    if (slot < 15)
      return {
        method: 'GET',
        path: `/v1/collections/bench/keys/k${pick(KEYS)}`,
        headers: { host: 'kv.localhost', ...auth },
      };
    if (slot < 17)
      return {
        method: 'POST',
        path: `/v1/collections/bench/keys/k${pick(KEYS)}`,
        headers: { host: 'kv.localhost', ...auth, ...json },
        body: JSON.stringify({ value: { n: i, at: 'bench' } }),
      };
    return {
      method: 'POST',
      path: `/v1/databases/${databaseId}/collections/items:find`,
      headers: { host: 'docdb.localhost', ...auth, ...json },
      body: JSON.stringify({ filter: { group: pick(20) }, limit: 10 }),
    };
  });
}

/**
 * Scale-out benchmark: the same mixed read/write workload (config reads and patches, kv gets and
 * sets, docdb finds) through HAProxy (deploy/haproxy.cfg) in front of 1, 2 and 3 instances that
 * share one PostgreSQL database, beside one instance with no balancer, in interleaved rounds.
 */
export async function run(): Promise<void> {
  if (!process.env.DATABASE_URL) {
    console.error('bench cluster needs DATABASE_URL: the instances share one PostgreSQL database');
    process.exitCode = 2;
    return;
  }
  await installHaproxy();
  const database = await benchDatabaseUrl();
  const dataDir = mkdtempSync(join(tmpdir(), 'stratus-bench-cluster-'));
  const instances: Child[] = [];
  const balancers: ChildProcess[] = [];
  const env = (i: number) => ({
    DATA_DIR: join(dataDir, `instance-${i + 1}`),
    DATABASE_URL: database.url,
    MAX_CONNECTIONS_PER_ADDRESS: '100000',
    ADMIN_EMAIL: ADMIN.email,
    ADMIN_PASSWORD: ADMIN.password,
  });
  try {
    // The first instance applies the migrations; the others start together after it.
    instances.push(await startStratus([], env(0)));
    instances.push(
      ...(await Promise.all(Array.from({ length: INSTANCES - 1 }, (_, i) => startStratus([], env(i + 1))))),
    );

    // One HAProxy per instance count, each from deploy/haproxy.cfg, all running during the rounds.
    const ports: number[] = [];
    for (let n = 1; n <= INSTANCES; n++) {
      const port = await freePort();
      const stats = await freePort();
      ports.push(port);
      balancers.push(
        startHaproxy({
          configPath: join(dataDir, `haproxy-${n}.cfg`),
          balancer: port,
          stats,
          servers: instances.slice(0, n).map((instance, i) => ({ name: `stratus${i + 1}`, port: instance.port })),
        }),
      );
      await waitForServersUp(stats);
    }

    const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
    const first = instances[0]!;
    const started = Date.now();
    // A session (bearer token) rather than an API key: the workload measures serving, not the
    // gateway's bcrypt-guarded key checks.
    const login = await expect(
      call(
        first.port,
        agent,
        'POST',
        '/v0/login',
        { host: 'auth.localhost', 'content-type': 'application/json' },
        JSON.stringify(ADMIN),
      ),
      200,
      'logging in',
    );
    const auth = { authorization: `Bearer ${(JSON.parse(login.text) as { token: string }).token}` };
    const json = { 'content-type': 'application/json' };
    await parallel(CONFIGS, (i) =>
      expect(
        call(
          first.port,
          agent,
          'POST',
          '/v0/configs',
          { host: 'config.localhost', ...json },
          JSON.stringify({ id: `cfg-${i}`, entries: { 'feature.enabled': i % 2 === 0, 'limits.rps': i } }),
        ),
        201,
        `seeding cfg-${i}`,
      ),
    );
    await expect(
      call(
        first.port,
        agent,
        'POST',
        '/v1/collections',
        { host: 'kv.localhost', ...auth, ...json },
        '{"name":"bench"}',
      ),
      200,
      'creating the kv collection',
    );
    await parallel(KEYS, (i) =>
      expect(
        call(
          first.port,
          agent,
          'POST',
          `/v1/collections/bench/keys/k${i}`,
          { host: 'kv.localhost', ...auth, ...json },
          JSON.stringify({ value: { n: i } }),
        ),
        200,
        `seeding k${i}`,
      ),
    );
    const db = JSON.parse(
      (
        await expect(
          call(
            first.port,
            agent,
            'POST',
            '/v1/databases',
            { host: 'docdb.localhost', ...auth, ...json },
            '{"name":"bench"}',
          ),
          201,
          'creating the docdb database',
        )
      ).text,
    ) as { id: string };
    const documents = Array.from({ length: DOCUMENTS }, (_, i) =>
      JSON.stringify({ n: i, group: i % 20, name: `doc ${i}` }),
    );
    await expect(
      call(
        first.port,
        agent,
        'POST',
        `/v1/databases/${db.id}/collections/items:insert`,
        { host: 'docdb.localhost', ...auth },
        documents.join('\n'),
      ),
      201,
      'seeding the documents',
    );
    agent.destroy();
    console.log(
      `seeded ${CONFIGS} config objects, ${KEYS} kv keys and ${DOCUMENTS} documents in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );

    const requests = mixedRequests(auth, db.id);
    const scenario = (name: string, port: number) => ({
      name,
      options: { url: `http://127.0.0.1:${port}`, requests } satisfies autocannon.Options,
    });
    const [direct, ...balanced] = await interleaved(
      [
        scenario('1 instance, no balancer', first.port),
        ...ports.map((port, i) => scenario(`HAProxy, ${i + 1} instance${i ? 's' : ''}`, port)),
      ],
      { rounds: ROUNDS, roundSeconds: DURATION_S / ROUNDS, warmupSeconds: WARMUP_S },
    );
    report(
      `cluster benchmark (store ${storeLabel(...instances)}, mixed: 40% config GET, 10% config PATCH, 25% kv GET, 10% kv set, 15% docdb find; 50 connections, ${DURATION_S} s each in ${ROUNDS} interleaved rounds; everything on this machine)`,
      direct!,
      balanced,
    );
  } finally {
    await Promise.all(balancers.map((balancer) => stopHaproxy(balancer)));
    await Promise.all(instances.map((instance) => instance.stop()));
    await database.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
