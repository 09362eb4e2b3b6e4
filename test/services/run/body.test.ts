import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { coalesce, ownsBodyChunks } from '../../../src/services/run/registry/body.ts';

async function* from(chunks: Uint8Array[]): AsyncGenerator<Uint8Array> {
  for (const chunk of chunks) yield chunk;
}

/** Keeps every chunk (the directory blob store holds several before it writes them). */
async function collect(source: AsyncIterable<Uint8Array>): Promise<{ whole: Buffer; sizes: number[] }> {
  const copies: Buffer[] = [];
  for await (const chunk of source) copies.push(Buffer.from(chunk));
  return { whole: Buffer.concat(copies), sizes: copies.map((c) => c.length) };
}

describe('coalesce', () => {
  it('regroups small chunks into groups of the given size, in order, and yields the remainder', async () => {
    const data = randomBytes(10_000);
    const chunks = Array.from({ length: 10 }, (_, i) => data.subarray(i * 1000, (i + 1) * 1000));
    const { whole, sizes } = await collect(coalesce(from(chunks), 3000));
    assert.deepEqual(whole, data);
    assert.deepEqual(sizes, [3000, 3000, 3000, 1000]);
  });

  it('passes a large chunk on when nothing is held, and groups what follows it', async () => {
    const data = randomBytes(9_500);
    const chunks = [data.subarray(0, 4000), data.subarray(4000, 4500), data.subarray(4500)];
    const { whole, sizes } = await collect(coalesce(from(chunks), 3000));
    assert.deepEqual(whole, data);
    assert.deepEqual(sizes, [4000, 5500]);
  });

  it('yields nothing for an empty source', async () => {
    assert.deepEqual((await collect(coalesce(from([]), 3000))).sizes, []);
  });
});

describe('coalesce, socket-sized chunks', () => {
  it('passes chunks of 16 KiB and more on as they are, joining only the small ones between them', async () => {
    const data = randomBytes(64 * 1024 * 3 + 300);
    const chunks = [
      data.subarray(0, 100),
      data.subarray(100, 200),
      data.subarray(200, 200 + 64 * 1024),
      data.subarray(200 + 64 * 1024, 200 + 128 * 1024),
      data.subarray(200 + 128 * 1024, 300 + 128 * 1024),
      data.subarray(300 + 128 * 1024),
    ];
    const passed: Uint8Array[] = [];
    const copies: Buffer[] = [];
    for await (const chunk of coalesce(from(chunks))) {
      passed.push(chunk);
      copies.push(Buffer.from(chunk));
    }
    assert.deepEqual(Buffer.concat(copies), data);
    assert.deepEqual(
      copies.map((c) => c.length),
      [200, 64 * 1024, 64 * 1024, 100, 64 * 1024],
    );
    // No copy of the large chunks: the very buffers given.
    assert.equal(passed[1], chunks[2]);
    assert.equal(passed[4], chunks[5]);
  });
});

describe('ownsBodyChunks', () => {
  it('holds for a request read off a socket (the parser copies each chunk), not for an injected one', async () => {
    const app = Fastify();
    app.post('/', async (request) => ({ owns: ownsBodyChunks(request.raw) }));
    try {
      // Injected: the body chunks are the caller's own buffers (here a string).
      const injected = await app.inject({
        method: 'POST',
        url: '/',
        headers: { 'content-type': 'text/plain' },
        payload: 'x',
      });
      assert.deepEqual(injected.json(), { owns: false });
      await app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = app.server.address() as AddressInfo;
      const served = await new Promise<string>((resolve, reject) => {
        const request = http.request(
          { host: '127.0.0.1', port, method: 'POST', path: '/', headers: { 'content-type': 'text/plain' } },
          (response) => {
            let text = '';
            response.on('data', (chunk: Buffer) => (text += chunk.toString()));
            response.on('end', () => resolve(text));
          },
        );
        request.on('error', reject);
        request.end('x');
      });
      assert.deepEqual(JSON.parse(served), { owns: true });
    } finally {
      await app.close();
    }
  });
});
