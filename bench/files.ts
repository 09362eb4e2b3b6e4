import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { open, readFile, unlink } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { benchDatabaseUrl, flagFailures, startStratus, type Child } from './lib.ts';

// `npm run bench -- files`: 1 KiB uploads and downloads at 20 clients through the gateway (public
// port, platform API key), then 1 GiB up and down, each beside the same bytes written to or read
// from disk with node:fs in this process. The server runs on the embedded store (SQLite and the
// blob directory), or with DATABASE_URL on PostgreSQL (a schema of its own, dropped at the end);
// the printed label is the store its ready line names.
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = 20;
const SMALL = 1024;
const LARGE = Number(process.env.BENCH_FILES_LARGE ?? 1024 ** 3);
const BLOCK = 1024 * 1024;
const HOST = 'files.localhost';

async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

/** Samples a process's RSS while `work` runs; resolves with the work's result and the growth in bytes. */
async function withPeakRss<T>(pid: number, work: () => Promise<T>): Promise<{ result: T; growth: number }> {
  const baseline = await rssOf(pid);
  let peak = baseline;
  let running = true;
  const sampler = (async () => {
    while (running) {
      peak = Math.max(peak, await rssOf(pid).catch(() => 0));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  try {
    return { result: await work(), growth: peak - baseline };
  } finally {
    running = false;
    await sampler;
  }
}

function call(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string | Buffer,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, method, path, headers: { host: HOST, ...headers }, agent: false },
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

async function expectStatus(
  reply: Promise<{ status: number; body: string }>,
  status: number,
  what: string,
): Promise<string> {
  const answer = await reply;
  if (answer.status !== status) throw new Error(`${what} answered ${answer.status}: ${answer.body.slice(0, 300)}`);
  return answer.body;
}

/** Streams `size` bytes (one reused 1 MiB block) as a PUT body; resolves with seconds taken. */
function uploadLarge(port: number, path: string, headers: Record<string, string>, size: number): Promise<number> {
  const block = randomBytes(BLOCK);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'PUT',
        path,
        headers: { host: HOST, ...headers, 'content-length': String(size) },
        agent: false,
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => {
          if (res.statusCode !== 201)
            return reject(new Error(`large upload answered ${res.statusCode}: ${text.slice(0, 300)}`));
          const stored = JSON.parse(text) as { size: number };
          if (stored.size !== size) return reject(new Error(`large upload stored ${stored.size} bytes`));
          resolve((performance.now() - started) / 1000);
        });
      },
    );
    req.on('error', reject);
    let sent = 0;
    const write = () => {
      while (sent < size) {
        const n = Math.min(BLOCK, size - sent);
        sent += n;
        if (!req.write(n === BLOCK ? block : block.subarray(0, n))) return void req.once('drain', write);
      }
      req.end();
    };
    write();
  });
}

function downloadLarge(port: number, path: string, headers: Record<string, string>, size: number): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, headers: { host: HOST, ...headers }, agent: false }, (res) => {
        let received = 0;
        res.on('data', (chunk: Buffer) => (received += chunk.length));
        res.on('end', () =>
          received === size
            ? resolve((performance.now() - started) / 1000)
            : reject(new Error(`downloaded ${received} of ${size} bytes`)),
        );
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/** Baseline: the same bytes written to a file with node:fs (and fsynced, as the store does). */
async function baselineWrite(path: string, size: number): Promise<number> {
  const block = randomBytes(BLOCK);
  const started = performance.now();
  const stream = createWriteStream(path);
  for (let sent = 0; sent < size; sent += BLOCK)
    if (!stream.write(block.subarray(0, Math.min(BLOCK, size - sent)))) await once(stream, 'drain');
  stream.end();
  await once(stream, 'finish');
  const handle = await open(path, 'r+');
  await handle.sync();
  await handle.close();
  return (performance.now() - started) / 1000;
}

async function baselineRead(path: string): Promise<number> {
  const started = performance.now();
  for await (const _chunk of createReadStream(path, { highWaterMark: 64 * 1024 })) {
    // read and drop, as the download client does
  }
  return (performance.now() - started) / 1000;
}

/** Baseline for small operations: 1 KiB files written (fsynced) or read with node:fs, 20 at a time. */
async function baselineOps(dir: string, kind: 'write' | 'read', seconds: number): Promise<number> {
  const body = randomBytes(SMALL);
  const readPath = join(dir, 'small-read');
  if (kind === 'read') await baselineWrite(readPath, SMALL);
  let done = 0;
  let next = 0;
  const deadline = performance.now() + seconds * 1000;
  const worker = async () => {
    while (performance.now() < deadline) {
      if (kind === 'write') {
        const path = join(dir, `small-${next++}`);
        const handle = await open(path, 'w');
        await handle.write(body);
        await handle.sync();
        await handle.close();
      } else {
        await readFile(readPath);
      }
      done++;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  return done / ((performance.now() - started) / 1000);
}

async function cannon(
  name: string,
  options: autocannon.Options,
): Promise<{
  rate: number;
  p50: number;
  p99: number;
  bad: number;
  name: string;
  errors: number;
  non2xx: number;
  statuses: Record<string, number>;
}> {
  const result = await autocannon({ connections: CONNECTIONS, duration: DURATION_S, ...options });
  const statuses: Record<string, number> = {};
  for (const [code, stat] of Object.entries(result.statusCodeStats ?? {}))
    if (!code.startsWith('2') && (stat.count ?? 0) > 0) statuses[code] = stat.count ?? 0;
  const errors = result.errors; // timeouts included
  return {
    rate: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    bad: errors + result.non2xx,
    name,
    errors,
    non2xx: result.non2xx,
    statuses,
  };
}

export async function run(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-files-'));
  let server: Child | undefined;
  const database = await benchDatabaseUrl();
  try {
    server = await startStratus([], {
      DATA_DIR: join(dir, 'data'),
      DATABASE_URL: database.url,
      FILES_MAX_UPLOAD_BYTES: String(2 * LARGE),
    });
    const identity = {
      'x-gateway-authentication': JSON.stringify({ user: { id: 'user-bench' } }),
      'content-type': 'application/json',
    };
    const created = JSON.parse(
      await expectStatus(
        call(
          server.internalPort,
          'POST',
          '/v0/apikeys',
          { ...identity, host: 'apikeys.localhost' },
          '{"name":"bench"}',
        ),
        201,
        'creating the API key',
      ),
    ) as { key: string; secret: string };
    // Measured through the public port with a platform API key, as a client would call it.
    const auth = { 'api-key': created.key, 'api-secret': created.secret };
    const bucket = JSON.parse(
      await expectStatus(
        call(server.port, 'POST', '/v1/buckets', { ...auth, 'content-type': 'application/json' }, '{"name":"bench"}'),
        201,
        'creating the bucket',
      ),
    ) as { id: string };
    const base = `/v1/buckets/${bucket.id}/files`;
    const url = `http://127.0.0.1:${server.port}`;

    // 1. 1 KiB uploads, each to a new path with its own content.
    let n = 0;
    const put = await cannon('PUT 1 KiB', {
      url,
      headers: { host: HOST, ...auth },
      requests: [
        {
          method: 'PUT',
          setupRequest: (req) => ({ ...req, path: `${base}/small/${n++}.bin`, body: randomBytes(SMALL) }),
        },
      ],
    });
    const putBaseline = await baselineOps(dir, 'write', DURATION_S / 2);

    // 2. 1 KiB downloads of one file.
    await expectStatus(
      call(server.port, 'PUT', `${base}/hot.bin`, auth, randomBytes(SMALL)),
      201,
      'uploading the hot file',
    );
    const get = await cannon('GET 1 KiB', { url: `${url}${base}/hot.bin`, headers: { host: HOST, ...auth } });
    const getBaseline = await baselineOps(dir, 'read', DURATION_S / 2);

    // 3 and 4. 1 GiB up and down, with the server's memory growth.
    const up = await withPeakRss(server.pid!, () => uploadLarge(server!.port, `${base}/large.bin`, auth, LARGE));
    const down = await withPeakRss(server.pid!, () => downloadLarge(server!.port, `${base}/large.bin`, auth, LARGE));
    const baselinePath = join(dir, 'baseline-large');
    const writeSeconds = await baselineWrite(baselinePath, LARGE);
    const readSeconds = await baselineRead(baselinePath);
    await unlink(baselinePath);

    const mb = (seconds: number) => LARGE / 1e6 / seconds;
    const store = server.store === 'SQLite' ? 'SQLite + blob directory' : server.store;
    console.log(
      `\nfiles benchmark (store ${store}, ${CONNECTIONS} connections, ${DURATION_S} s per small scenario, through the gateway with an API key)`,
    );
    console.table([
      {
        scenario: 'PUT 1 KiB (ops/s)',
        value: Math.round(put.rate),
        baseline: Math.round(putBaseline),
        ratio: (put.rate / putBaseline).toFixed(3),
        'p50 ms': put.p50,
        'p99 ms': put.p99,
        'errors+non2xx': put.bad,
        'server RSS growth MB': '',
      },
      {
        scenario: 'GET 1 KiB (ops/s)',
        value: Math.round(get.rate),
        baseline: Math.round(getBaseline),
        ratio: (get.rate / getBaseline).toFixed(3),
        'p50 ms': get.p50,
        'p99 ms': get.p99,
        'errors+non2xx': get.bad,
        'server RSS growth MB': '',
      },
      {
        scenario: `upload ${(LARGE / 1024 ** 3).toFixed(2)} GiB (MB/s)`,
        value: Math.round(mb(up.result)),
        baseline: Math.round(mb(writeSeconds)),
        ratio: (writeSeconds / up.result).toFixed(3),
        'p50 ms': '',
        'p99 ms': '',
        'errors+non2xx': 0,
        'server RSS growth MB': (up.growth / 1e6).toFixed(1),
      },
      {
        scenario: `download ${(LARGE / 1024 ** 3).toFixed(2)} GiB (MB/s)`,
        value: Math.round(mb(down.result)),
        baseline: Math.round(mb(readSeconds)),
        ratio: (readSeconds / down.result).toFixed(3),
        'p50 ms': '',
        'p99 ms': '',
        'errors+non2xx': 0,
        'server RSS growth MB': (down.growth / 1e6).toFixed(1),
      },
    ]);
    console.log(
      'baselines (this process, node:fs): PUT = write + fsync a new 1 KiB file, 20 at a time; GET = readFile of a 1 KiB file, 20 at a time; large = the same bytes streamed to a file then fsynced, and read back with a read stream',
    );
    flagFailures([put, get]);
  } finally {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
    await database.drop();
  }
}
