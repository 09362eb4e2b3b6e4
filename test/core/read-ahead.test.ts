import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { readAhead } from '../../src/core/read-ahead.ts';

function chunk(n: number, size: number): Uint8Array {
  return Buffer.alloc(size, n % 256);
}

test('readAhead: every chunk arrives, in order, unchanged', async () => {
  const sizes = Array.from({ length: 200 }, (_, i) => 1 + ((i * 7919) % 5000));
  const source = (async function* () {
    for (const [i, size] of sizes.entries()) {
      if (i % 13 === 0) await sleep(0);
      yield chunk(i, size);
    }
  })();
  const got: Uint8Array[] = [];
  for await (const piece of readAhead(source, { aheadBytes: 16 * 1024 })) {
    got.push(piece);
    if (got.length % 17 === 0) await sleep(1);
  }
  assert.deepEqual(
    got.map((c) => c.byteLength),
    sizes,
  );
  for (const [i, c] of got.entries())
    assert.ok(
      c.every((b) => b === i % 256),
      `chunk ${i} intact`,
    );
});

test('readAhead: waiting chunks are joined up to joinBytes, never split, order kept', async () => {
  const sizes = [100, 200, 300, 5000, 50, 50, 400, 900, 10];
  let pulled = 0;
  const source = (async function* () {
    for (const [i, size] of sizes.entries()) {
      pulled++;
      yield chunk(i, size);
    }
  })();
  const reader = readAhead(source, { aheadBytes: 1 << 20, joinBytes: 1000 });
  const first = await reader.next();
  assert.equal(first.done, false);
  // Let the reader pull everything while the consumer holds the first piece.
  await sleep(10);
  assert.equal(pulled, sizes.length);
  const pieces = [first.value as Uint8Array];
  for await (const piece of reader) pieces.push(piece);
  const joined = Buffer.concat(pieces);
  const expected = Buffer.concat(sizes.map((size, i) => chunk(i, size)));
  assert.ok(joined.equals(expected), 'same bytes in the same order');
  for (const piece of pieces.slice(1))
    assert.ok(piece.byteLength <= 1000 || sizes.includes(piece.byteLength), `piece of ${piece.byteLength} bytes`);
  assert.ok(pieces.length < sizes.length, 'waiting chunks were joined');
  assert.ok(
    pieces.some((p) => p.byteLength === 5000),
    'a chunk larger than joinBytes passes whole',
  );
});

test('readAhead: holds at most aheadBytes (plus one chunk) ahead of a stalled consumer', async () => {
  const CHUNK = 1000;
  const AHEAD = 10_000;
  let pulled = 0;
  const source = (async function* () {
    // Runaway guard: an unbounded reader fails the bound below instead of looping for ever.
    while (pulled < 10_000) {
      pulled++;
      await sleep(0);
      yield chunk(pulled, CHUNK);
    }
  })();
  const reader = readAhead(source, { aheadBytes: AHEAD });
  let consumed = 0;
  for (let round = 0; round < 5; round++) {
    const step = await reader.next();
    assert.equal(step.done, false);
    consumed++;
    // The consumer is slow: the source runs until the bound, then stops.
    const deadline = Date.now() + 2000;
    while ((pulled - consumed) * CHUNK < AHEAD - CHUNK && Date.now() < deadline) await sleep(5);
    await sleep(20);
    const heldBytes = (pulled - consumed) * CHUNK;
    assert.ok(heldBytes <= AHEAD + CHUNK, `held ${heldBytes} bytes ahead`);
    assert.ok(heldBytes >= AHEAD - CHUNK, `read ahead up to the bound (held ${heldBytes})`);
  }
  await reader.return();
});

test('readAhead: a source error surfaces at the next read and ends the reading', async () => {
  const boom = new Error('boom');
  let nextCalls = 0;
  let returned = false;
  const source: AsyncIterable<Uint8Array> = {
    [Symbol.asyncIterator]: () => ({
      next: () => {
        nextCalls++;
        if (nextCalls <= 2) return Promise.resolve({ done: false, value: chunk(nextCalls, 10) });
        return Promise.reject(boom);
      },
      return: () => {
        returned = true;
        return Promise.resolve({ done: true, value: undefined });
      },
    }),
  };
  const got: number[] = [];
  await assert.rejects(
    (async () => {
      for await (const piece of readAhead(source, { aheadBytes: 1000 })) {
        got.push(piece[0]!);
        await sleep(5);
      }
    })(),
    (err) => err === boom,
  );
  // The error comes at the read after the first chunk (the second, still waiting, is dropped);
  // the failed source is not read again.
  assert.deepEqual(got, [1]);
  assert.equal(nextCalls, 3);
  assert.equal(returned, false, 'a source that threw is finished, not returned');
});

test('readAhead: stopping early ends the source (its finally runs) and stops pulling', async () => {
  let pulled = 0;
  let finallyRan = false;
  const source = (async function* () {
    try {
      for (;;) {
        pulled++;
        yield chunk(pulled, 100);
      }
    } finally {
      finallyRan = true;
    }
  })();
  for await (const piece of readAhead(source, { aheadBytes: 1000 })) {
    assert.equal(piece[0], 1);
    break;
  }
  await sleep(10);
  assert.equal(finallyRan, true);
  const after = pulled;
  await sleep(10);
  assert.equal(pulled, after, 'the source is no longer pulled');
  assert.ok(after <= 12, `pulled ${after} chunks of 100 bytes with a 1000-byte bound`);
});

test('readAhead: stopping early does not wait for a read still under way', async () => {
  let returned = false;
  let nextCalls = 0;
  // One chunk, then a read that never completes (a quiet socket).
  const source: AsyncIterable<Uint8Array> = {
    [Symbol.asyncIterator]: () => ({
      next: () => {
        nextCalls++;
        return nextCalls === 1
          ? Promise.resolve({ done: false, value: chunk(1, 10) })
          : new Promise<IteratorResult<Uint8Array>>(() => {});
      },
      return: () => {
        returned = true;
        return Promise.resolve({ done: true, value: undefined });
      },
    }),
  };
  const reader = readAhead(source, { aheadBytes: 1000 });
  assert.equal((await reader.next()).done, false);
  await sleep(5);
  assert.equal(nextCalls, 2);
  const stopped = await Promise.race([reader.return().then(() => 'stopped'), sleep(1000).then(() => 'stuck')]);
  assert.equal(stopped, 'stopped');
  assert.equal(returned, true);
});
