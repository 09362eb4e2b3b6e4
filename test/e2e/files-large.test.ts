import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { createTestDatabase, testDialect, type TestDatabase } from '../helpers/database.ts';
import { testSettings } from '../helpers/service.ts';
import { as, rssOf, spawnFilesServer, type FileBody } from '../services/files/helpers.ts';

// 1 GiB up and down through the files service running alone in a child process, so that its
// resident memory is measured without the client's.
const GIB = 1024 ** 3;
const BLOCK = 1024 * 1024;
let database: TestDatabase;
let server: Awaited<ReturnType<typeof spawnFilesServer>>;
before(async () => {
  database = await createTestDatabase();
  server = await spawnFilesServer(testSettings(database, { filesMaxUploadBytes: 2 * GIB }));
});
after(async () => {
  await server?.kill('SIGTERM');
  await database?.cleanup();
});

function block(index: number): Buffer {
  const buffer = Buffer.alloc(BLOCK, index % 251);
  buffer.writeUInt32BE(index, 0);
  return buffer;
}

const mib = (bytes: number) => (bytes / BLOCK).toFixed(1);

// Deadlines on every wait on the server, which would otherwise have none: a request fails with how
// far it got once it runs over its bound in all or once no byte has moved for STALL_MS. The slowest
// transfers seen (PostgreSQL, loaded 2-core machine) took 115 s up and 56 s down.
const CALL_WITHIN_MS = 30_000;
const UPLOAD_WITHIN_MS = 180_000;
const DOWNLOAD_WITHIN_MS = 100_000;
const STALL_MS = 60_000;

/**
 * Runs the request `start` makes until it calls resolve or reject; fails it (destroying the
 * request) with `what` and `state()` once `withinMs` pass, or STALL_MS pass without `progress()` changing.
 */
function bounded<T>(
  what: string,
  withinMs: number,
  progress: () => number,
  state: () => string,
  start: (resolve: (value: T) => void, reject: (error: Error) => void) => http.ClientRequest,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const started = Date.now();
    let last = progress();
    let moved = started;
    const watch = setInterval(() => {
      const now = Date.now();
      if (progress() !== last) {
        last = progress();
        moved = now;
      }
      const reason =
        now - started > withinMs
          ? `not done after ${withinMs / 1000} s`
          : now - moved > STALL_MS
            ? `nothing moved for ${STALL_MS / 1000} s`
            : undefined;
      if (reason === undefined) return;
      const error = new Error(`${what}: ${reason}; ${state()}`);
      clearInterval(watch);
      reject(error);
      req.destroy(error);
    }, 250);
    const req = start(
      (value) => {
        clearInterval(watch);
        resolve(value);
      },
      (error) => {
        clearInterval(watch);
        reject(error);
      },
    );
  });
}

function json<T>(method: string, path: string, body?: string): Promise<{ status: number; body: T }> {
  let answer: string | undefined;
  return bounded(
    `${method} ${path}`,
    CALL_WITHIN_MS,
    () => answer?.length ?? -1,
    () => (answer === undefined ? 'no answer yet' : `answer incomplete: ${answer}`),
    (resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: server.port,
          method,
          path,
          headers: { ...as('big'), 'content-type': 'application/json' },
          agent: false,
        },
        (res) => {
          answer = '';
          res.on('data', (chunk: Buffer) => (answer += chunk.toString()));
          res.on('end', () => {
            try {
              resolve({ status: res.statusCode ?? 0, body: JSON.parse(answer!) as T });
            } catch (error) {
              reject(new Error(`${method} ${path} answered ${res.statusCode} ${answer}: ${String(error)}`));
            }
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
      return req;
    },
  );
}

test('1 GiB streamed up and down: correct hashes (node:crypto), server memory growth < 150 MB', async () => {
  const bucket = await json<{ id: string }>('POST', '/v1/buckets', '{"name":"big"}');
  assert.equal(bucket.status, 201);
  const path = `/v1/buckets/${bucket.body.id}/files/big.bin`;
  const baseline = await rssOf(server.pid);
  let peak = baseline;
  let downloadBaseline = 0;
  let downloadPeak = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const rss = await rssOf(server.pid);
      peak = Math.max(peak, rss);
      downloadPeak = Math.max(downloadPeak, rss);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  const expectedSha = createHash('sha256');
  const expectedMd5 = createHash('md5');
  try {
    const started = performance.now();
    let sent = 0;
    let answer: string | undefined;
    const uploaded = await bounded<FileBody>(
      'upload',
      UPLOAD_WITHIN_MS,
      () => sent + (answer?.length ?? 0),
      () =>
        `${mib(sent)} of ${mib(GIB)} MiB sent, ${mib(GIB - sent)} MiB still to send; ${answer === undefined ? 'no answer yet' : `answer so far: ${answer}`}`,
      (resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port: server.port,
            method: 'PUT',
            path,
            headers: { ...as('big'), 'content-length': String(GIB) },
            agent: false,
          },
          (res) => {
            answer = '';
            res.on('data', (chunk: Buffer) => (answer += chunk.toString()));
            res.on('end', () =>
              res.statusCode === 201
                ? resolve(JSON.parse(answer!) as FileBody)
                : reject(new Error(`${res.statusCode}: ${answer}`)),
            );
            res.on('error', reject);
          },
        );
        req.on('error', reject);
        let i = 0;
        const write = () => {
          while (i < GIB / BLOCK) {
            const chunk = block(i++);
            expectedSha.update(chunk);
            expectedMd5.update(chunk);
            const more = req.write(chunk, () => (sent += chunk.length));
            if (!more) return void req.once('drain', write);
          }
          req.end();
        };
        write();
        return req;
      },
    );
    const uploadSeconds = (performance.now() - started) / 1000;
    const uploadGrowth = peak - baseline;
    assert.equal(uploaded.size, GIB);
    assert.equal(uploaded.hash_sha256, expectedSha.digest('hex'));
    assert.equal(uploaded.hash_md5, expectedMd5.digest('hex'));

    const downloadStarted = performance.now();
    downloadBaseline = await rssOf(server.pid);
    downloadPeak = downloadBaseline;
    let received = 0;
    let length: string | undefined;
    const downloaded = await bounded<{ sha: string; size: number; length: string | undefined }>(
      'download',
      DOWNLOAD_WITHIN_MS,
      () => received,
      () =>
        `${mib(received)} of ${mib(GIB)} MiB received, ${mib(GIB - received)} MiB still missing${length === undefined ? '; no response headers yet' : ''}`,
      (resolve, reject) =>
        http
          .get({ host: '127.0.0.1', port: server.port, path, headers: as('big'), agent: false }, (res) => {
            length = res.headers['content-length'];
            const hash = createHash('sha256');
            res.on('data', (chunk: Buffer) => {
              received += chunk.length;
              hash.update(chunk);
            });
            res.on('end', () => resolve({ sha: hash.digest('hex'), size: received, length }));
            res.on('error', reject);
          })
          .on('error', reject),
    );
    const downloadSeconds = (performance.now() - downloadStarted) / 1000;
    assert.equal(downloaded.length, String(GIB));
    assert.equal(downloaded.size, GIB);
    assert.equal(downloaded.sha, uploaded.hash_sha256);
    const growthMb = (peak - baseline) / 1e6;
    const downloadGrowthMb = (downloadPeak - downloadBaseline) / 1e6;
    console.log(
      `1 GiB: upload ${uploadSeconds.toFixed(1)} s, download ${downloadSeconds.toFixed(1)} s; server RSS growth ${growthMb.toFixed(1)} MB ` +
        `(upload phase ${(uploadGrowth / 1e6).toFixed(1)} MB; download phase ${downloadGrowthMb.toFixed(1)} MB over the ${((downloadBaseline - baseline) / 1e6).toFixed(1)} MB it started at)`,
    );
    // The bounds are about a seventh of the 1 GiB moved: a server that held the file, or any large
    // part of it, fails them; garbage that waits for V8's GC does not (the upload alone reached
    // 96-101 MB in runs on Node 24, so 100 MB failed now and then without anything being held).
    assert.ok(uploadGrowth / 1e6 < 150, `server RSS grew by ${(uploadGrowth / 1e6).toFixed(1)} MB during the upload`);
    // The download streams from the blob store. On SQLite the whole test stays within 150 MB. On
    // PostgreSQL the driver hands each bytea chunk over as hex text (src/store/blob/postgres.ts):
    // per MiB read, about 2 MiB of hex strings plus the protocol and decoded buffers, all garbage that
    // waits for V8's GC. It lands on top of the 53-80 MB the upload left resident: the download alone
    // grew RSS by 58-93 MB in runs on Node 24 and 26 (totals up to 160 MB). So PostgreSQL gets its own
    // bound on the download's growth from where it started, with room for GC timing; a download that
    // held even a seventh of the 1 GiB it moves still fails it.
    if (testDialect === 'sqlite') assert.ok(growthMb < 150, `server RSS grew by ${growthMb.toFixed(1)} MB`);
    else assert.ok(downloadGrowthMb < 150, `server RSS grew by ${downloadGrowthMb.toFixed(1)} MB during the download`);
  } finally {
    sampling = false;
    await sampler;
  }
});
