import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchDatabaseUrl, startStratus, type Child } from './lib.ts';

// `npm run bench -- run`: a 200 MB blob pushed in 5 MB chunks through the real platform (public
// port, Basic credentials of a platform API key), beside writing the same bytes with node:fs and
// one fsync in the same run. The push writes every chunk durably and then streams the chunks
// once more through a digest-verifying put, so about twice the disk work of the baseline.
const BLOB_MB = Number(process.env.BENCH_RUN_BLOB_MB ?? 200);
const CHUNK_MB = Number(process.env.BENCH_RUN_CHUNK_MB ?? 5);
const ROUNDS = Number(process.env.BENCH_RUN_ROUNDS ?? 3);
const TARGET_MBPS = 150;
const MB = 1024 * 1024;

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function call(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer | string,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: { ...headers, ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}) },
        agent,
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function expect(reply: Reply, status: number, what: string): Reply {
  if (reply.status !== status) throw new Error(`${what} answered ${reply.status}: ${reply.body.slice(0, 300)}`);
  return reply;
}

/** One chunked push of `data` under `name`; resolves with the elapsed seconds (and of those, the final PUT's). */
async function push(
  port: number,
  host: string,
  auth: Record<string, string>,
  name: string,
  data: Buffer,
  digest: string,
): Promise<{ total: number; finish: number }> {
  const started = performance.now();
  const headers = { host, ...auth };
  const location = String(
    expect(await call(port, 'POST', `/v2/${name}/blobs/uploads/`, headers), 202, 'starting the upload').headers
      .location,
  );
  const chunk = CHUNK_MB * MB;
  for (let at = 0; at < data.length; at += chunk) {
    const end = Math.min(data.length, at + chunk);
    expect(
      await call(
        port,
        'PATCH',
        location,
        { ...headers, 'content-type': 'application/octet-stream', 'content-range': `${at}-${end - 1}` },
        data.subarray(at, end),
      ),
      202,
      `chunk at ${at}`,
    );
  }
  const finishing = performance.now();
  expect(await call(port, 'PUT', `${location}?digest=${digest}`, headers), 201, 'finishing the upload');
  const done = performance.now();
  return { total: (done - started) / 1000, finish: (done - finishing) / 1000 };
}

/** The baseline: the same bytes in the same chunk size to one file, then fsync. */
async function writeFile(path: string, data: Buffer): Promise<number> {
  const started = performance.now();
  const handle = await open(path, 'w');
  try {
    const chunk = CHUNK_MB * MB;
    for (let at = 0; at < data.length; at += chunk) await handle.write(data, at, Math.min(chunk, data.length - at));
    await handle.sync();
  } finally {
    await handle.close();
  }
  const seconds = (performance.now() - started) / 1000;
  rmSync(path, { force: true });
  return seconds;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

export async function run(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-run-'));
  const database = await benchDatabaseUrl();
  let stratus: Child | undefined;
  try {
    stratus = await startStratus([], { DATA_DIR: join(dir, 'data'), DATABASE_URL: database.url });
    const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'user-bench' } }) };
    const created = expect(
      await call(
        stratus.internalPort,
        'POST',
        '/v0/apikeys',
        { host: 'apikeys.localhost', 'content-type': 'application/json', ...identity },
        '{"name":"bench"}',
      ),
      201,
      'creating the API key',
    );
    const key = JSON.parse(created.body) as { key: string; secret: string };
    const auth = { authorization: `Basic ${Buffer.from(`${key.key}:${key.secret}`).toString('base64')}` };
    const host = `localhost:${stratus.port}`;

    const pushes: number[] = [];
    const finishes: number[] = [];
    const writes: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Fresh bytes each round, so no round deduplicates against the blobs of the previous one.
      const data = randomBytes(BLOB_MB * MB);
      const digest = `sha256:${createHash('sha256').update(data).digest('hex')}`;
      writes.push(await writeFile(join(dir, `baseline-${round}`), data));
      const pushed = await push(stratus.port, host, auth, `bench/blob${round}`, data, digest);
      pushes.push(pushed.total);
      finishes.push(pushed.finish);
    }
    const pushMBps = BLOB_MB / median(pushes);
    const writeMBps = BLOB_MB / median(writes);
    console.log(
      `\nrun: ${BLOB_MB} MB blob in ${CHUNK_MB} MB chunks, median of ${ROUNDS} rounds (store ${stratus.store})`,
    );
    console.table([
      {
        scenario: 'node:fs write + fsync (baseline)',
        'MB/s': Math.round(writeMBps),
        'seconds (median)': median(writes).toFixed(2),
        'ratio to baseline': '1.000',
      },
      {
        scenario: 'registry chunked push (public port, Basic)',
        'MB/s': Math.round(pushMBps),
        'seconds (median)': median(pushes).toFixed(2),
        'ratio to baseline': (pushMBps / writeMBps).toFixed(3),
      },
    ]);
    console.log(
      `of the push, the final PUT (verifying the digest and storing the blob) took ${median(finishes).toFixed(2)} s (median)`,
    );
    console.log(`target ≥ ${TARGET_MBPS} MB/s: ${pushMBps >= TARGET_MBPS ? 'met' : 'NOT met'}`);
  } finally {
    agent.destroy();
    await stratus?.stop();
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
