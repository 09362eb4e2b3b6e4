import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { flagFailures, load, rssOf, startStratus, type Child, type LoadResult } from './lib.ts';
import { recordResult } from './results.ts';

// `npm run bench -- memory`: one `stratus serve` on the embedded store, its RSS idle, then a mixed
// workload over six services (config reads, a docdb streamed insert and map-index finds, kv set and
// get, logs ingest and filters, a large file up and down, warm lambda calls), its peak RSS, and its
// RSS once the load has stopped and the server has sat idle for SETTLE_S — the figure issue 26
// bounds: within 300 MiB of idle, and no growth with the size of a transfer.

/**
 * Why the figure can stay above the target, from heap snapshots, smaps and V8's heap statistics
 * (bench/README.md: Memory).
 */
const UNMET_NOTE =
  "heap snapshots before and after a step differ by ~1.4 MB and live data grows ~5 MiB over the whole workload: what stays is V8's young generation at its grown size, pages V8 keeps pooled after the docdb insert's peak, and freed memory glibc keeps; only a memory-reducing collection returns them (IDLE_MEMORY_RELEASE, off by default: the next burst then cost 2-4x the CPU per request)";
const LOAD_S = Number(process.env.BENCH_DURATION ?? 10) / 2;
const SETTLE_S = 15;
const LARGE = Number(process.env.BENCH_FILES_LARGE ?? 512 * 1024 ** 2);
const LOG_MB = 200;
const DOCUMENTS = 200_000;
const IDENTITY = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'user-bench' } }) };
const MiB = 1024 ** 2;

/**
 * The RSS by kind of mapping, from /proc/<pid>/smaps: V8's pages (anonymous 256 KiB mappings: the
 * main heap, the worker threads' and the lambda isolates' heaps, and the pages V8 keeps pooled
 * after a heap shrank), glibc malloc's arenas (the brk heap and the 64 MiB-aligned thread arenas:
 * SQLite's page caches, Buffers, and freed memory the allocator keeps), file-backed pages (the
 * node binary, libraries) and the other anonymous mappings.
 */
async function rssSplit(pid: number): Promise<string> {
  const text = await readFile(`/proc/${pid}/smaps`, 'utf8');
  const maps: { start: number; end: number; perm: string; name: string; rss: number }[] = [];
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head)
      maps.push({ start: parseInt(head[1]!, 16), end: parseInt(head[2]!, 16), perm: head[3]!, name: head[4]!, rss: 0 });
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && maps.length > 0) maps.at(-1)!.rss = Number(rss[1]) * 1024;
  }
  const ARENA = 64 * MiB;
  const sums = { v8: 0, malloc: 0, file: 0, other: 0 };
  maps.forEach((map, i) => {
    const next = maps[i + 1];
    // A thread arena: 64 MiB reserved at a 64 MiB boundary, its used part read-write.
    const arena =
      map.name === '' &&
      map.start % ARENA === 0 &&
      (map.end - map.start === ARENA ||
        (next?.start === map.end && next.perm === '---p' && next.end - map.start === ARENA));
    if (map.name === '[heap]' || arena) sums.malloc += map.rss;
    else if (map.name.startsWith('/')) sums.file += map.rss;
    else if (map.name === '' && map.perm === 'rw-p' && map.end - map.start === 256 * 1024) sums.v8 += map.rss;
    else sums.other += map.rss;
  });
  const mib = (bytes: number) => `${Math.round(bytes / MiB)} MiB`;
  return `V8 pages ${mib(sums.v8)}, malloc arenas ${mib(sums.malloc)}, file-backed ${mib(sums.file)}, other ${mib(sums.other)}`;
}

/** One request on the internal port as the bench user; streams `body` when it is a function. */
function call(
  port: number,
  service: string,
  method: string,
  path: string,
  body?: string | Buffer | ((req: http.ClientRequest) => void),
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent: false,
        headers: { host: `${service}.localhost`, 'content-type': 'application/json', ...IDENTITY, ...headers },
      },
      (res) => {
        let text = '';
        let bytes = 0;
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (text.length < 4096) text += chunk.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, bytes }));
      },
    );
    req.on('error', reject);
    if (typeof body === 'function') body(req);
    else req.end(body);
  });
}

async function ok(
  answer: Promise<{ status: number; text: string; bytes: number }>,
  what: string,
): Promise<{ text: string; bytes: number }> {
  const { status, text, bytes } = await answer;
  if (status < 200 || status > 299) throw new Error(`${what} answered ${status}: ${text.slice(0, 300)}`);
  return { text, bytes };
}

/** Writes `total` bytes to a request in 1 MiB blocks, respecting back-pressure. */
function streamBytes(total: number, block: Buffer) {
  return (req: http.ClientRequest) => {
    let sent = 0;
    const write = () => {
      while (sent < total) {
        const piece = total - sent >= block.length ? block : block.subarray(0, total - sent);
        sent += piece.length;
        if (!req.write(piece)) return void req.once('drain', write);
      }
      req.end();
    };
    write();
  };
}

/** The mixed workload; every step checks its answers, and every load's non-2xx fail the run. */
async function workload(stratus: Child, mark: (step: string) => Promise<void>): Promise<LoadResult[]> {
  const port = stratus.internalPort;
  const url = `http://127.0.0.1:${port}`;
  const loads: LoadResult[] = [];

  // config: 2,000 objects, then random reads.
  for (let i = 0; i < 2_000; i += 100)
    await Promise.all(
      Array.from({ length: 100 }, (_, j) =>
        ok(
          call(port, 'config', 'POST', '/v0/configs', JSON.stringify({ id: `cfg-${i + j}`, entries: { n: i + j } })),
          'creating a config object',
        ),
      ),
    );
  loads.push(
    await load('config reads', {
      url,
      duration: LOAD_S,
      headers: { host: 'config.localhost' },
      requests: Array.from({ length: 2_000 }, (_, i) => ({ method: 'GET' as const, path: `/v0/configs/cfg-${i}` })),
    }),
  );

  await mark('config');
  // docdb: a collection with a map index, a streamed insert, then finds by the index.
  const database = JSON.parse(
    (await ok(call(port, 'docdb', 'POST', '/v1/databases', '{"name":"memory"}'), 'creating the database')).text,
  ) as { id: string };
  const collection = `/v1/databases/${database.id}/collections/people`;
  await ok(
    call(port, 'docdb', 'POST', `${collection}:createIndex`, '{"name":"by-email","type":"map","field":"email"}'),
    'creating the map index',
  );
  const inserted = await ok(
    call(
      port,
      'docdb',
      'POST',
      `${collection}:insert`,
      (req) => {
        let next = 0;
        const write = () => {
          while (next < DOCUMENTS) {
            let chunk = '';
            for (const end = Math.min(DOCUMENTS, next + 500); next < end; next++)
              chunk += `{"id":"doc-${next}","email":"user${next}@example.com","n":${next}}\n`;
            if (!req.write(chunk)) return void req.once('drain', write);
          }
          req.end();
        };
        write();
      },
      { 'content-type': 'application/x-ndjson' },
    ),
    'the streamed insert',
  );
  if (inserted.text.includes('"error"')) throw new Error(`the streamed insert reported errors: ${inserted.text}`);
  loads.push(
    await load('docdb map-index finds', {
      url,
      duration: LOAD_S,
      headers: { host: 'docdb.localhost', 'content-type': 'application/json', ...IDENTITY },
      requests: Array.from({ length: 2_000 }, () => ({
        method: 'POST' as const,
        path: `${collection}:find`,
        body: JSON.stringify({ index: 'by-email', value: `user${Math.floor(Math.random() * DOCUMENTS)}@example.com` }),
      })),
    }),
  );

  await mark('docdb');
  // kv: sets, then gets.
  await ok(call(port, 'kv', 'POST', '/v1/collections', '{"name":"memory"}'), 'creating the kv collection');
  const kvHeaders = { host: 'kv.localhost', 'content-type': 'application/json', ...IDENTITY };
  // Every key exists before the timed sets: a short run's sets may not reach them all, and the gets
  // of the missing ones would answer 404.
  for (let i = 0; i < 2_000; i += 100)
    await Promise.all(
      Array.from({ length: 100 }, (_, j) =>
        ok(
          call(port, 'kv', 'POST', `/v1/collections/memory/keys/key-${i + j}`, `{"value":{"n":${i + j}}}`),
          'setting a key',
        ),
      ),
    );
  loads.push(
    await load('kv sets', {
      url,
      duration: LOAD_S,
      headers: kvHeaders,
      requests: Array.from({ length: 2_000 }, (_, i) => ({
        method: 'POST' as const,
        path: `/v1/collections/memory/keys/key-${i}`,
        body: `{"value":{"n":${i}}}`,
      })),
    }),
  );
  loads.push(
    await load('kv gets', {
      url,
      duration: LOAD_S,
      headers: kvHeaders,
      requests: Array.from({ length: 2_000 }, (_, i) => ({
        method: 'GET' as const,
        path: `/v1/collections/memory/keys/key-${i}`,
      })),
    }),
  );

  await mark('kv');
  // logs: LOG_MB of lines in 1 MiB bodies, then a literal and a regex filter over them.
  const logger = JSON.parse(
    (await ok(call(port, 'logs', 'POST', '/v1/loggers', '{"name":"memory"}'), 'creating the logger')).text,
  ) as { id: string };
  const line = `${'x'.repeat(60)} level=info some log text 0123\n`.slice(-100);
  const body = Buffer.from(line.repeat(Math.floor(MiB / 100)));
  for (let i = 0; i < LOG_MB; i += 4)
    await Promise.all(
      Array.from({ length: 4 }, () =>
        ok(call(port, 'logs', 'POST', `/v1/loggers/${logger.id}/ingest`, body), 'ingesting logs'),
      ),
    );
  for (const pattern of ['ERROR', 'level=(warn|error)'])
    await ok(
      call(port, 'logs', 'GET', `/v1/loggers/${logger.id}/filter?regex=${encodeURIComponent(pattern)}`),
      `filtering logs by ${pattern}`,
    );

  await mark('logs');
  // files: one large file up, and down twice.
  const bucket = JSON.parse(
    (await ok(call(port, 'files', 'POST', '/v1/buckets', '{"name":"memory"}'), 'creating the bucket')).text,
  ) as { id: string };
  const file = `/v1/buckets/${bucket.id}/files/large.bin`;
  await ok(
    call(port, 'files', 'PUT', file, streamBytes(LARGE, Buffer.alloc(MiB, 7)), {
      'content-type': 'application/octet-stream',
      'content-length': String(LARGE),
    }),
    'uploading the large file',
  );
  for (let i = 0; i < 2; i++) {
    const down = await ok(call(port, 'files', 'GET', file), 'downloading the large file');
    if (down.bytes !== LARGE) throw new Error(`downloaded ${down.bytes} of ${LARGE} bytes`);
  }

  await mark('files');
  // lambda: a hello-world, called warm.
  const lambda = JSON.parse(
    (
      await ok(
        call(
          port,
          'lambda',
          'POST',
          '/api/v0/lambdas',
          JSON.stringify({
            name: 'memory-hello',
            code: 'export default (req) => ({ body: { message: "Hello, World!" } })',
            method: 'GET',
            path: '/hello-world',
          }),
        ),
        'creating the lambda',
      )
    ).text,
  ) as { id: string };
  loads.push(
    await load('lambda warm calls', {
      url: `${url}/run/${lambda.id}`,
      duration: LOAD_S,
      headers: { host: 'lambda.localhost', ...IDENTITY },
    }),
  );
  await mark('lambda');
  return loads;
}

/**
 * What the server's own Prometheus metrics say: the main thread's V8 heap in use and allocated (and
 * how much of that is the young generation), external memory (Buffers), and the lambda isolates
 * alive (each a V8 heap of its own, with the worker threads' heaps and V8's page pool the part of
 * rssSplit's V8 pages beyond the main heap).
 */
async function heapBreakdown(port: number): Promise<string> {
  const { text } = await new Promise<{ text: string }>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: '/metrics', headers: { host: 'gateway.localhost' } }, (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ text }));
      })
      .on('error', reject);
  });
  const metric = (name: string) =>
    Number(new RegExp(`^${name}(?:\\{[^}]*\\})? ([\\d.e+]+)$`, 'm').exec(text)?.[1] ?? NaN);
  const mib = (bytes: number) => `${Math.round(bytes / MiB)} MiB`;
  const isolates = (state: string) =>
    Number(new RegExp(`^stratus_lambda_isolates\\{[^}]*state="${state}"[^}]*\\} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
  const heapTotal = metric('nodejs_heap_size_total_bytes');
  const heapUsed = metric('nodejs_heap_size_used_bytes');
  const external = metric('nodejs_external_memory_bytes');
  // The young generation grows to its maximum under load (128 MiB measured on Node 24) and keeps it.
  const young = Number(/^nodejs_heap_space_size_total_bytes\{space="new"\} (\d+)$/m.exec(text)?.[1] ?? NaN);
  return `main V8 heap ${mib(heapUsed)} used of ${mib(heapTotal)} (young generation ${mib(young)}), external ${mib(external)}, lambda isolates ${isolates('idle')} idle + ${isolates('busy')} busy`;
}

export async function run(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-memory-'));
  let stratus: Child | undefined;
  try {
    stratus = await startStratus([], {
      DATA_DIR: join(dir, 'data'),
      FILES_MAX_UPLOAD_BYTES: String(2 * LARGE),
      LOGS_MAX_BYTES: String((LOG_MB + 64) * MiB),
      LAMBDA_OWNER_CONCURRENCY: '100',
    });
    const pid = stratus.pid!;
    // Idle is read after the same settling as the end figure: with IDLE_MEMORY_RELEASE set the
    // server gives its start-up's garbage back after its first idle interval, and the end figure
    // would otherwise gain that release over an idle figure read before it.
    await new Promise((resolve) => setTimeout(resolve, SETTLE_S * 1000));
    const idle = await rssOf(pid);
    let peak = idle;
    // The peak within each step too: a transfer's garbage shows there, gone by the step's end.
    let stepPeak = idle;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        stepPeak = Math.max(stepPeak, await rssOf(pid).catch(() => 0));
        peak = Math.max(peak, stepPeak);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    let loads: LoadResult[];
    const steps: { after: string; 'RSS MiB': number; 'step peak MiB': number; split: string }[] = [];
    steps.push({
      after: 'nothing (idle)',
      'RSS MiB': Math.round(idle / MiB),
      'step peak MiB': Math.round(idle / MiB),
      split: `${await rssSplit(pid)}; ${await heapBreakdown(stratus.internalPort)}`,
    });
    try {
      loads = await workload(stratus, async (step) => {
        const rss = await rssOf(pid);
        steps.push({
          after: step,
          'RSS MiB': Math.round(rss / MiB),
          'step peak MiB': Math.round(Math.max(stepPeak, rss) / MiB),
          split: `${await rssSplit(pid)}; ${await heapBreakdown(stratus!.internalPort)}`,
        });
        stepPeak = rss;
      });
    } finally {
      sampling = false;
      await sampler;
    }
    await new Promise((resolve) => setTimeout(resolve, SETTLE_S * 1000));
    const after = await rssOf(pid);
    const breakdown = `${await rssSplit(pid)}; ${await heapBreakdown(stratus.internalPort)}`;
    console.log(`\nmemory benchmark (store ${stratus.store}, the server's RSS)`);
    console.table(loads.map((r) => ({ load: r.name, 'req/s': Math.round(r.requestsPerSecond), 'p99 ms': r.p99 })));
    console.table(steps);
    console.table([
      { when: `idle, ${SETTLE_S} s after start`, 'RSS MiB': Math.round(idle / MiB) },
      { when: 'peak during the workload', 'RSS MiB': Math.round(peak / MiB) },
      { when: `${SETTLE_S} s after the workload`, 'RSS MiB': Math.round(after / MiB) },
    ]);
    console.log(`after the workload (smaps; the server's /metrics): ${breakdown}`);
    const met = after - idle <= 300 * MiB;
    recordResult({
      bench: 'memory',
      path: `RSS ${SETTLE_S} s after a mixed workload (peak ${Math.round(peak / MiB)} MiB)`,
      figure: after / MiB,
      unit: 'MiB',
      lowerIsBetter: true,
      peer: { name: 'the same server idle', figure: idle / MiB },
      target: '≤ idle + 300 MiB',
      met,
      note: `after the workload ${breakdown}; growth by step: ${steps
        .slice(1)
        .map(
          (step, i) =>
            `${step.after} ${step['RSS MiB'] - steps[i]!['RSS MiB'] >= 0 ? '+' : ''}${step['RSS MiB'] - steps[i]!['RSS MiB']} MiB`,
        )
        .join(', ')}${met ? '' : `; ${UNMET_NOTE}`}`,
    });
    flagFailures(loads);
  } finally {
    await stratus?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
