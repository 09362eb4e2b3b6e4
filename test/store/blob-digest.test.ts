import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { streamDigest, type DigestAlgorithm } from '../../src/store/blob/digest.ts';

const MiB = 1024 * 1024;

async function digestOf(algorithm: DigestAlgorithm, chunks: Uint8Array[]): Promise<string> {
  const digest = streamDigest(algorithm);
  try {
    for (const chunk of chunks) {
      const behind = digest.update(chunk);
      if (behind) await behind;
    }
    return await digest.digest();
  } finally {
    digest.dispose();
  }
}

function expected(algorithm: DigestAlgorithm, chunks: Uint8Array[]): string {
  const hash = createHash(algorithm);
  for (const chunk of chunks) hash.update(chunk);
  return hash.digest('hex');
}

/** `total` bytes cut into chunks of `size` (the last one shorter). */
function cut(total: number, size: number): Uint8Array[] {
  const bytes = randomBytes(total);
  const chunks: Uint8Array[] = [];
  for (let offset = 0; offset < total; offset += size) chunks.push(bytes.subarray(offset, offset + size));
  return chunks;
}

describe('streamDigest', () => {
  for (const algorithm of ['sha256', 'md5'] as const) {
    it(`${algorithm}: equals createHash for empty, small, batch-sized and multi-batch streams`, async () => {
      const shapes: [number, number][] = [
        [0, 1],
        [10, 3],
        [MiB - 1, 64 * 1024],
        [MiB, 64 * 1024],
        [MiB + 1, 64 * 1024],
        [7 * MiB + 13, 100_003],
        [3 * MiB, 3 * MiB],
      ];
      for (const [total, size] of shapes) {
        const chunks = cut(total, size);
        assert.equal(await digestOf(algorithm, chunks), expected(algorithm, chunks), `${total} bytes by ${size}`);
      }
    });
  }

  it('streams run side by side without mixing their hashes', async () => {
    const streams = Array.from({ length: 5 }, (_, i) => cut(2 * MiB + i * 1000, 64 * 1024));
    const digests = await Promise.all(streams.map((chunks) => digestOf('sha256', chunks)));
    assert.deepEqual(
      digests,
      streams.map((chunks) => expected('sha256', chunks)),
    );
  });

  it('a disposed stream leaves the next one intact', async () => {
    const dropped = streamDigest('md5');
    dropped.update(randomBytes(3 * MiB));
    dropped.dispose();
    const chunks = cut(2 * MiB, 64 * 1024);
    assert.equal(await digestOf('md5', chunks), expected('md5', chunks));
  });

  it('holds at most a bounded number of batches at the worker', async () => {
    const digest = streamDigest('sha256');
    try {
      let waited = 0;
      const chunks = cut(16 * MiB, MiB);
      for (const chunk of chunks) {
        const behind = digest.update(chunk);
        if (behind) {
          waited += 1;
          await behind;
        }
      }
      assert.ok(waited > 0, 'a fast producer is asked to wait');
      assert.equal(await digest.digest(), expected('sha256', chunks));
    } finally {
      digest.dispose();
    }
  });

  it('give moves whole buffers to the worker and copies the rest, in order with update', async () => {
    const data = randomBytes(3 * MiB + 777);
    // Whole buffers of their own (moved), views into one buffer and small ones (copied), mixed
    // with plain updates.
    const whole = (start: number, end: number) => new Uint8Array(data.subarray(start, end));
    const pieces: { chunk: Uint8Array; give: boolean }[] = [
      { chunk: whole(0, 100), give: true },
      { chunk: whole(100, 64 * 1024), give: true },
      { chunk: data.subarray(64 * 1024, 200 * 1024), give: true },
      { chunk: whole(200 * 1024, MiB), give: false },
      { chunk: whole(MiB, 2 * MiB), give: true },
      ...Array.from({ length: 16 }, (_, i) => ({
        chunk: whole(2 * MiB + i * 64 * 1024, 2 * MiB + (i + 1) * 64 * 1024),
        give: true,
      })),
      { chunk: whole(3 * MiB, 3 * MiB + 777), give: true },
    ];
    const digest = streamDigest('sha256');
    try {
      for (const { chunk, give } of pieces) {
        const behind = give ? digest.give(chunk) : digest.update(chunk);
        if (behind) await behind;
      }
      assert.equal(await digest.digest(), expected('sha256', [data]));
    } finally {
      digest.dispose();
    }
    assert.equal(pieces[1]!.chunk.byteLength, 0, 'a whole buffer is moved (detached)');
    assert.equal(pieces[4]!.chunk.byteLength, 0);
    assert.equal(pieces[2]!.chunk.byteLength, 136 * 1024, 'a view is copied');
    assert.equal(pieces[0]!.chunk.byteLength, 100, 'a small chunk is copied');
  });
});
