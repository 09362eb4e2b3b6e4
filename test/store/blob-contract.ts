import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import { BlobDigestMismatchError, BlobTooLargeError, type BlobStore } from '../../src/store/blob/types.ts';

export interface BlobContractOptions {
  /** Where the adapter cuts chunks, so range reads are checked right at its boundaries. */
  chunkSize?: number;
}

const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

export function sha256Of(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Feeds `bytes` in pieces of an awkward size, as plain Uint8Arrays (not Buffers). */
export async function* pieces(bytes: Uint8Array, size = 65_521): AsyncGenerator<Uint8Array> {
  for (let offset = 0; offset < bytes.byteLength; offset += size) {
    yield new Uint8Array(bytes.subarray(offset, Math.min(offset + size, bytes.byteLength)));
  }
}

export async function readAll(stream: NodeJS.ReadableStream): Promise<{ bytes: Buffer; reads: number }> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(typeof part === 'string' ? Buffer.from(part) : part);
  return { bytes: Buffer.concat(parts), reads: parts.length };
}

/**
 * The behaviour every BlobStore adapter must have. `make` is called once for the suite; each case
 * uses its own random content, so cases do not depend on each other.
 */
export function runBlobStoreContract(
  name: string,
  make: () => Promise<{ store: BlobStore; cleanup(): Promise<void> }>,
  options: BlobContractOptions = {},
): void {
  const chunk = options.chunkSize ?? 256 * 1024;

  describe(`BlobStore contract: ${name}`, () => {
    let store: BlobStore;
    let cleanup: () => Promise<void>;

    before(async () => {
      ({ store, cleanup } = await make());
    });
    after(async () => {
      await cleanup();
    });

    const get = async (sha256: string, range?: { start: number; end: number }) => {
      const stream = await store.get(sha256, range);
      assert.ok(stream, `blob ${sha256} should exist`);
      return (await readAll(stream)).bytes;
    };

    it('round-trips content under its lowercase hex SHA-256', async () => {
      const content = randomBytes(10_000);
      const info = await store.put(pieces(content, 777));
      assert.deepEqual(info, { sha256: sha256Of(content), size: content.length });
      assert.match(info.sha256, /^[0-9a-f]{64}$/);
      assert.deepEqual(await get(info.sha256), content);
    });

    it('accepts a Node readable stream and string chunks', async () => {
      const content = randomBytes(5_000);
      const info = await store.put(Readable.from([content.subarray(0, 100), content.subarray(100)]));
      assert.equal(info.sha256, sha256Of(content));
      assert.deepEqual(await get(info.sha256), content);

      const text = `héllo ${randomBytes(8).toString('hex')}`;
      const stream = new PassThrough();
      stream.end(text, 'utf8');
      const textInfo = await store.put(stream);
      assert.deepEqual(textInfo, { sha256: sha256Of(Buffer.from(text)), size: Buffer.byteLength(text) });
      assert.equal((await get(textInfo.sha256)).toString('utf8'), text);
    });

    it('stat reports the size, and null for an absent blob', async () => {
      const content = randomBytes(1234);
      const info = await store.put(pieces(content));
      assert.deepEqual(await store.stat(info.sha256), { sha256: info.sha256, size: 1234 });
      const absent = sha256Of(randomBytes(32));
      assert.equal(await store.stat(absent), null);
      assert.equal(await store.get(absent), null);
      assert.equal(await store.get(absent, { start: 0, end: 10 }), null);
    });

    it('dedupes: putting the same content twice (even concurrently) yields the same blob', async () => {
      const content = randomBytes(chunk + 4321);
      const first = await store.put(pieces(content));
      const second = await store.put(pieces(content, 1000));
      assert.deepEqual(second, first);
      assert.deepEqual(await get(first.sha256), content);

      const other = randomBytes(2 * chunk + 17);
      const results = await Promise.all([
        store.put(pieces(other)),
        store.put(pieces(other, 4096)),
        store.put(pieces(other, 99_999)),
      ]);
      for (const info of results) assert.deepEqual(info, { sha256: sha256Of(other), size: other.length });
      assert.deepEqual(await get(sha256Of(other)), other);
    });

    it('streams a multi-chunk blob back intact, in several reads', async () => {
      const content = randomBytes(3 * 1024 * 1024 + 123);
      const info = await store.put(pieces(content, 64 * 1024));
      assert.deepEqual(info, { sha256: sha256Of(content), size: content.length });
      const stream = await store.get(info.sha256);
      assert.ok(stream);
      const { bytes, reads } = await readAll(stream);
      assert.equal(bytes.length, content.length);
      assert.ok(bytes.equals(content), 'content differs');
      assert.ok(reads > 1, `expected a streamed read, got ${reads} part(s)`);
    });

    it('serves byte ranges at and across chunk boundaries and within a chunk', async () => {
      const content = randomBytes(3 * chunk + 1000);
      const { sha256 } = await store.put(pieces(content));
      const size = content.length;
      const ranges: Array<[number, number]> = [
        [0, 0],
        [0, chunk - 1],
        [chunk - 1, chunk],
        [chunk, chunk],
        [chunk, 2 * chunk - 1],
        [chunk + 10, chunk + 20],
        [chunk - 5, 3 * chunk + 5],
        [3 * chunk, size - 1],
        [0, size - 1],
      ];
      for (const [start, end] of ranges) {
        const bytes = await get(sha256, { start, end });
        assert.ok(bytes.equals(content.subarray(start, end + 1)), `range ${start}-${end}`);
      }
      // An end past the last byte is clamped; a start past it selects nothing.
      assert.ok((await get(sha256, { start: size - 10, end: size + 1000 })).equals(content.subarray(size - 10)));
      assert.equal((await get(sha256, { start: size, end: size + 5 })).length, 0);
      await assert.rejects(store.get(sha256, { start: 10, end: 5 }), RangeError);
      await assert.rejects(store.get(sha256, { start: -1, end: 5 }), RangeError);
      await assert.rejects(store.get(sha256, { start: 0.5, end: 5 }), RangeError);
    });

    it('stores an empty blob', async () => {
      const info = await store.put(pieces(new Uint8Array(0)));
      assert.deepEqual(info, { sha256: EMPTY_SHA256, size: 0 });
      assert.deepEqual(await store.stat(EMPTY_SHA256), { sha256: EMPTY_SHA256, size: 0 });
      assert.equal((await get(EMPTY_SHA256)).length, 0);
      assert.equal((await get(EMPTY_SHA256, { start: 0, end: 10 })).length, 0);
    });

    it('rejects content over maxBytes with BlobTooLargeError and stores nothing', async () => {
      const content = randomBytes(chunk + 1000);
      await assert.rejects(store.put(pieces(content), { maxBytes: content.length - 1 }), (error: unknown) => {
        assert.ok(error instanceof BlobTooLargeError);
        assert.equal(error.maxBytes, content.length - 1);
        return true;
      });
      assert.equal(await store.stat(sha256Of(content)), null);
      // Exactly at the limit is fine.
      const info = await store.put(pieces(content), { maxBytes: content.length });
      assert.equal(info.size, content.length);
      // maxBytes 0 admits only the empty blob.
      await assert.rejects(store.put(pieces(Buffer.from('x')), { maxBytes: 0 }), BlobTooLargeError);
    });

    it('a put refused past maxBytes stops reading its source and ends it, as `for await` would', async () => {
      // An HTTP request body the put leaves unended keeps its reader attached, so the rest of the
      // body is never discarded and the keep-alive connection stalls (the registry's 413).
      const content = randomBytes(8 * chunk);
      let read = 0;
      let ended = false;
      async function* source(): AsyncGenerator<Uint8Array> {
        try {
          for await (const piece of pieces(content)) {
            read += piece.byteLength;
            yield piece;
          }
        } finally {
          ended = true;
        }
      }
      await assert.rejects(store.put(source(), { maxBytes: 2 * chunk }), BlobTooLargeError);
      // The source is ended without being awaited (a stuck one might never settle): a turn later.
      await new Promise((resolve) => setImmediate(resolve));
      assert.ok(ended, 'the source should be ended');
      assert.ok(read < content.length, `the source should not be read to its end (${read} bytes)`);
      assert.equal(await store.stat(sha256Of(content)), null);
    });

    it('giveChunks: a source that gives its chunks away stores the same content under the same digest', async () => {
      const content = randomBytes(5 * chunk + 333);
      // Whole buffers of their own (a store may move them), then a view into a larger one.
      async function* given(): AsyncGenerator<Uint8Array> {
        for (let offset = 0; offset < content.length - 333; offset += 64 * 1024)
          yield new Uint8Array(content.subarray(offset, Math.min(offset + 64 * 1024, content.length - 333)));
        yield Buffer.concat([content.subarray(content.length - 333), Buffer.alloc(10)]).subarray(0, 333);
      }
      const info = await store.put(given(), { giveChunks: true, expectedSha256: sha256Of(content) });
      assert.deepEqual(info.size, content.length);
      assert.deepEqual(await get(info.sha256), content);
    });

    it('rejects content whose digest differs from expectedSha256 and stores nothing', async () => {
      const content = randomBytes(3000);
      const claimed = sha256Of(randomBytes(16));
      await assert.rejects(store.put(pieces(content), { expectedSha256: claimed }), (error: unknown) => {
        assert.ok(error instanceof BlobDigestMismatchError);
        assert.equal(error.expected, claimed);
        assert.equal(error.actual, sha256Of(content));
        return true;
      });
      assert.equal(await store.stat(sha256Of(content)), null);
      assert.equal(await store.stat(claimed), null);
      const info = await store.put(pieces(content), { expectedSha256: sha256Of(content) });
      assert.equal(info.sha256, sha256Of(content));
      // A malformed expected digest is a caller error, reported before reading anything.
      await assert.rejects(store.put(pieces(content), { expectedSha256: sha256Of(content).toUpperCase() }), TypeError);
    });

    it('delete returns true once, then false; the blob is gone and can be stored again', async () => {
      const content = randomBytes(chunk + 5);
      const { sha256 } = await store.put(pieces(content));
      assert.equal(await store.delete(sha256), true);
      assert.equal(await store.stat(sha256), null);
      assert.equal(await store.get(sha256), null);
      assert.equal(await store.delete(sha256), false);
      await store.put(pieces(content));
      assert.deepEqual(await get(sha256), content);
    });

    it('treats malformed hashes as absent', async () => {
      const content = randomBytes(100);
      const { sha256 } = await store.put(pieces(content));
      const bad = [
        sha256.toUpperCase(),
        sha256.slice(0, 63),
        `${sha256}0`,
        `${sha256}\n`,
        `../../${sha256.slice(6)}`,
        '../../../../etc/passwd',
        `${sha256.slice(0, 2)}/${sha256.slice(2, 4)}/${sha256}`.slice(0, 64),
        '',
        `upload:${sha256.slice(7)}`,
      ];
      for (const value of bad) {
        assert.equal(await store.stat(value), null, JSON.stringify(value));
        assert.equal(await store.get(value), null, JSON.stringify(value));
        assert.equal(await store.delete(value), false, JSON.stringify(value));
      }
      assert.deepEqual(await store.stat(sha256), { sha256, size: 100 });
    });

    it('an aborted put rejects promptly, stops reading its source and stores nothing', async () => {
      const controller = new AbortController();
      const source = new PassThrough();
      const head = randomBytes(chunk + 10);
      source.write(head);
      const put = store.put(source, { signal: controller.signal });
      // Let the put consume what is there, then abort while it waits for more.
      await new Promise((resolve) => setTimeout(resolve, 50));
      controller.abort();
      await assert.rejects(put, { name: 'AbortError' });
      assert.ok(source.destroyed, 'the source should be destroyed');
      assert.equal(await store.stat(sha256Of(head)), null);

      const already = AbortSignal.abort();
      await assert.rejects(store.put(pieces(head), { signal: already }), { name: 'AbortError' });
      assert.equal(await store.stat(sha256Of(head)), null);
    });

    it('a source that fails rejects the put and stores nothing', async () => {
      const head = randomBytes(chunk + 10);
      async function* failing() {
        yield head;
        throw new Error('upload interrupted');
      }
      await assert.rejects(store.put(failing()), /upload interrupted/);
      assert.equal(await store.stat(sha256Of(head)), null);
    });
  });
}
