import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import type autocannon from 'autocannon';
import { benchDatabaseUrl, interleaved, report, startBareServer, startStratus } from './lib.ts';
import { recordResult } from './results.ts';

const OBJECTS = 10_000;

const randomObject = () => Math.floor(Math.random() * OBJECTS);
const POOL = 20_000;
const headers = { host: 'config.localhost', 'content-type': 'application/json' };

/**
 * Random reads with every tenth request a patch, drawn before the run: autocannon rebuilds a
 * request with a `setupRequest` hook on every send, which cut its own rate by 40 % here and, on a
 * small machine, took CPU from the server under test. Each connection cycles through its own share
 * of the pool (lib.ts `load`).
 */
function mixedRequests(): autocannon.Request[] {
  return Array.from({ length: POOL }, (_, i) =>
    i % 10 === 9
      ? {
          method: 'PATCH' as const,
          path: `/v0/configs/cfg-${randomObject()}`,
          body: JSON.stringify({ 'limits.rps': i, 'bench.touched': true }),
        }
      : { method: 'GET' as const, path: `/v0/configs/cfg-${randomObject()}` },
  );
}
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP_S = 5;
const ROUNDS = 2;

function post(port: number, path: string, body: string, agent: http.Agent): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent,
        headers: {
          host: 'config.localhost',
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Config benchmark: 10,000 config objects, then random reads with 10 % patches through the
 * public port (gateway routing + config service + store), beside a bare node:http server.
 */
export async function run(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'stratus-bench-'));
  const database = await benchDatabaseUrl();
  const stratus = await startStratus([], { DATA_DIR: dataDir, DATABASE_URL: database.url });
  try {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
    const started = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < OBJECTS) {
          const i = next++;
          const body = JSON.stringify({
            id: `cfg-${i}`,
            entries: {
              'feature.enabled': i % 2 === 0,
              'service.name': `svc-${i}`,
              'limits.rps': i,
              'owner.team': 'platform',
            },
          });
          const status = await post(stratus.port, '/v0/configs', body, agent);
          if (status !== 201) throw new Error(`seeding cfg-${i} answered ${status}`);
        }
      }),
    );
    agent.destroy();
    console.log(`seeded ${OBJECTS} config objects in ${((Date.now() - started) / 1000).toFixed(1)} s`);

    const sample = JSON.stringify({
      id: 'cfg-1',
      entries: { 'feature.enabled': false, 'service.name': 'svc-1', 'limits.rps': 1, 'owner.team': 'platform' },
    });
    const bare = await startBareServer(sample);
    const requests = mixedRequests();
    let baseline;
    let mixed;
    try {
      [baseline, mixed] = await interleaved(
        [
          // The baseline gets the same requests (it ignores them), so both scenarios cost the load generator alike.
          { name: 'bare node:http, fixed JSON', options: { url: `http://127.0.0.1:${bare.port}`, headers, requests } },
          {
            name: 'config via gateway: 90% GET, 10% PATCH',
            options: {
              url: `http://127.0.0.1:${stratus.port}`,
              headers,
              requests,
            },
          },
        ],
        { rounds: ROUNDS, roundSeconds: DURATION_S / ROUNDS, warmupSeconds: WARMUP_S },
      );
    } finally {
      await bare.stop();
    }
    report(
      `config benchmark (store ${stratus.store}, 50 connections, ${DURATION_S} s each in ${ROUNDS} interleaved rounds)`,
      baseline!,
      [mixed!],
    );
    recordResult({
      bench: 'config',
      path: 'config via the public port, 90% GET 10% PATCH (autocannon)',
      figure: mixed!.requestsPerSecond,
      unit: 'req/s',
      p50: mixed!.p50,
      p99: mixed!.p99,
      peer: {
        name: 'bare node:http, fixed JSON',
        figure: baseline!.requestsPerSecond,
        p50: baseline!.p50,
        p99: baseline!.p99,
      },
    });
  } finally {
    await stratus.stop();
    await database.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
