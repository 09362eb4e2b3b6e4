import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestService } from '../helpers/service.ts';
import {
  as,
  createBucket,
  pendingUploads,
  startFiles,
  storedBlobs,
  waitUntil,
  type FileBody,
} from '../services/files/helpers.ts';

// The files service on a real HTTP server (127.0.0.1, ephemeral port): real sockets for streaming,
// disconnects and raw request targets that no client library would normalise.
let service: TestService;
let port = 0;
before(async () => {
  service = await startFiles({ maxUploadBytes: 2 * 1024 ** 3 });
  await service.app.listen({ host: '127.0.0.1', port: 0 });
  port = (service.app.server.address() as AddressInfo).port;
});
after(async () => {
  await service.close();
});

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

function send(method: string, path: string, headers: Record<string, string>, body?: Buffer | string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A deterministic 1 MiB block, varied per index so that the content is not one repeated block. */
function block(index: number, size = 1024 * 1024): Buffer {
  const buffer = Buffer.alloc(size, index % 251);
  buffer.writeUInt32BE(index, 0);
  return buffer;
}

describe('files over real HTTP', () => {
  test('raw `..` and `.` segments in the request target → 400 (no normalisation)', async () => {
    const bucket = await createBucket(service, 'e2e-raw');
    for (const path of ['a/../b', '..', '.', 'a/./b', 'a/..', './a', 'a//b']) {
      const reply = await send(
        'PUT',
        `/v1/buckets/${bucket.id}/files/${path}`,
        { ...as('e2e-raw'), 'content-length': '1' },
        'x',
      );
      assert.equal(reply.status, 400, `${path}: ${reply.body.toString()}`);
      assert.equal(JSON.parse(reply.body.toString()).error.code, 'validation_error');
    }
  });

  test('an upload aborted by the client leaves no file record, no blob and no temp file', async () => {
    const bucket = await createBucket(service, 'e2e-abort');
    const blobsBefore = await storedBlobs(service);
    const got = new Promise<void>((resolve) => {
      const req = http.request({
        host: '127.0.0.1',
        port,
        method: 'PUT',
        path: `/v1/buckets/${bucket.id}/files/partial.bin`,
        headers: { ...as('e2e-abort'), 'content-length': String(50 * 1024 * 1024) },
        agent: false,
      });
      req.on('error', () => resolve());
      req.write(block(1));
      req.write(block(2), () => setTimeout(() => req.destroy(), 100));
    });
    await got;
    // The server notices, stops the put and removes its temp file.
    await waitUntil(async () => (await pendingUploads(service)) === 0, 5_000, 'the temp file to go');
    const meta = await send('GET', `/v1/buckets/${bucket.id}/files/partial.bin?metadata`, as('e2e-abort'));
    assert.equal(meta.status, 404);
    assert.deepEqual(await storedBlobs(service), blobsBefore);
    // The service still works.
    const ok = await send(
      'PUT',
      `/v1/buckets/${bucket.id}/files/after.txt`,
      { ...as('e2e-abort'), 'content-length': '2' },
      'ok',
    );
    assert.equal(ok.status, 201);
  });

  test('a chunked upload over the limit → 413 once exceeded, connection closed, nothing stored', async () => {
    const small = await startFiles({ maxUploadBytes: 1024 * 1024 });
    await small.app.listen({ host: '127.0.0.1', port: 0 });
    const smallPort = (small.app.server.address() as AddressInfo).port;
    try {
      const bucket = await createBucket(small, 'e2e-413');
      const reply = await new Promise<{ status: number; connection: string | undefined; body: string }>(
        (resolve, reject) => {
          const req = http.request(
            {
              host: '127.0.0.1',
              port: smallPort,
              method: 'PUT',
              path: `/v1/buckets/${bucket.id}/files/big`,
              headers: as('e2e-413'),
              agent: false,
            },
            (res) => {
              let text = '';
              res.on('data', (chunk: Buffer) => (text += chunk.toString()));
              res.on('end', () =>
                resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body: text }),
              );
            },
          );
          req.on('error', reject);
          // Keeps sending until the server answers: the body would be 8 MiB.
          let i = 0;
          const write = () => {
            while (i < 8) if (!req.write(block(i++))) return void req.once('drain', write);
            req.end();
          };
          write();
        },
      );
      assert.equal(reply.status, 413);
      assert.equal(JSON.parse(reply.body).error.code, 'payload_too_large');
      assert.equal(reply.connection, 'close');
      const declared = await new Promise<number>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port: smallPort,
            method: 'PUT',
            path: `/v1/buckets/${bucket.id}/files/big`,
            headers: { ...as('e2e-413'), 'content-length': String(2 * 1024 * 1024) },
            agent: false,
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.write(block(0, 1024)); // the server answers from the header, before the body
      });
      assert.equal(declared, 413);
      assert.deepEqual(await storedBlobs(small), []);
      await waitUntil(async () => (await pendingUploads(small)) === 0, 5_000, 'no temp file');
    } finally {
      await small.close();
    }
  });

  test('concurrent uploads to one path: the last to finish wins; readers never see a mix', async () => {
    const bucket = await createBucket(service, 'e2e-race');
    const path = `/v1/buckets/${bucket.id}/files/contended.bin`;
    const versions = Array.from({ length: 8 }, (_, v) =>
      Buffer.concat(Array.from({ length: 4 }, (_, i) => block(v * 100 + i, 256 * 1024))),
    );
    const hashes = new Set(versions.map((v) => createHash('sha256').update(v).digest('hex')));
    const first = await send(
      'PUT',
      path,
      { ...as('e2e-race'), 'content-length': String(versions[0]!.length) },
      versions[0],
    );
    assert.equal(first.status, 201);

    let reading = true;
    let reads = 0;
    const reader = (async () => {
      while (reading) {
        const got = await send('GET', path, as('e2e-race'));
        assert.equal(got.status, 200);
        const sha = createHash('sha256').update(got.body).digest('hex');
        assert.ok(hashes.has(sha), 'a read returned bytes of no single version');
        assert.equal(got.headers.etag, `"${sha}"`, 'the ETag names the bytes that were sent');
        reads++;
      }
    })();
    const results = await Promise.all(
      versions.map(async (content) => {
        const reply = await send('PUT', path, { ...as('e2e-race'), 'content-length': String(content.length) }, content);
        assert.ok(reply.status === 200 || reply.status === 201, reply.body.toString());
        // Exact digits: stamps 1 ns apart are the same JavaScript number.
        const updated = BigInt(/"updated_timestamp":(\d+)/.exec(reply.body.toString())![1]!);
        return { file: JSON.parse(reply.body.toString()) as FileBody, updated };
      }),
    );
    reading = false;
    await reader;
    assert.ok(reads > 0);
    // The last commit has the highest updated_timestamp; its content is what remains.
    const last = results.reduce((a, b) => (b.updated > a.updated ? b : a));
    assert.equal(new Set(results.map((r) => r.updated)).size, results.length, 'every commit has its own stamp');
    const final = await send('GET', path, as('e2e-race'));
    assert.equal(createHash('sha256').update(final.body).digest('hex'), last.file.hash_sha256);
    const listed = JSON.parse(
      (await send('GET', `/v1/buckets/${bucket.id}/list/`, as('e2e-race'))).body.toString(),
    ) as FileBody[];
    assert.equal(listed.length, 1, 'one path, one file');
    assert.equal(listed[0]!.id, JSON.parse(first.body.toString()).id);
  });
});
