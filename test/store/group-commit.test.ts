import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { GroupCommit, settle, type Settled } from '../../src/store/group-commit.ts';

const ok = <T>(value: T): Settled<T> => ({ ok: true, value });

/** A write whose batches stay open until `release()`; it records each batch it was given. */
function heldWrite() {
  const batches: number[][] = [];
  const pending: (() => void)[] = [];
  const write = (inputs: readonly number[]) => {
    batches.push([...inputs]);
    return new Promise<Settled<number>[]>((resolve) => pending.push(() => resolve(inputs.map((n) => ok(n * 10)))));
  };
  const release = async () => {
    for (const settle of pending.splice(0)) settle();
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { batches, write, release };
}

describe('GroupCommit', () => {
  it('an idle call goes alone at once; calls made while batches are in flight go together next', async () => {
    const held = heldWrite();
    const group = new GroupCommit(held.write, { maxBatch: 100, maxInFlight: 2 });
    const results = [1, 2, 3, 4, 5].map((n) => group.submit(n));
    assert.deepEqual(held.batches, [[1], [2]]);
    await held.release();
    assert.deepEqual(held.batches, [[1], [2], [3, 4, 5]]);
    await held.release();
    assert.deepEqual(await Promise.all(results), [10, 20, 30, 40, 50]);
  });

  it('tells its observer of every batch written: how many calls and how long it took', async () => {
    const held = heldWrite();
    const seen: [number, number][] = [];
    const group = new GroupCommit(held.write, {
      maxBatch: 100,
      maxInFlight: 1,
      observe: (calls, seconds) => seen.push([calls, seconds]),
    });
    const results = [1, 2, 3].map((n) => group.submit(n));
    await held.release();
    await held.release();
    await Promise.all(results);
    assert.deepEqual(
      seen.map(([calls]) => calls),
      [1, 2],
    );
    assert.ok(seen.every(([, seconds]) => seconds >= 0 && seconds < 5));
  });

  it('no batch is larger than maxBatch', async () => {
    const held = heldWrite();
    const group = new GroupCommit(held.write, { maxBatch: 2, maxInFlight: 1 });
    const results = [1, 2, 3, 4, 5, 6].map((n) => group.submit(n));
    for (let i = 0; i < 5; i++) await held.release();
    assert.deepEqual(held.batches, [[1], [2, 3], [4, 5], [6]]);
    assert.deepEqual(await Promise.all(results), [10, 20, 30, 40, 50, 60]);
  });

  it('a failed batch fails each of its calls and the next batch still runs', async () => {
    let calls = 0;
    const group = new GroupCommit(
      async (inputs: readonly number[]) => {
        calls++;
        if (inputs.includes(2)) throw new Error('boom');
        return inputs.map((n) => ok(n + 1));
      },
      { maxBatch: 2, maxInFlight: 1 },
    );
    const first = group.submit(1);
    const failed = [group.submit(2), group.submit(3)];
    const later = group.submit(4);
    assert.equal(await first, 2);
    for (const call of failed) await assert.rejects(call, /boom/);
    assert.equal(await later, 5);
    assert.equal(calls, 3);
  });

  it('a write answering the wrong number of outputs fails its calls', async () => {
    const group = new GroupCommit(async () => [ok(1), ok(2)], { maxBatch: 10, maxInFlight: 1 });
    await assert.rejects(group.submit(1), /2 outputs for 1 inputs/);
  });

  it("each call settles with its own outcome: one call's error fails only that call", async () => {
    const group = new GroupCommit(
      async (inputs: readonly number[]) =>
        Promise.all(
          inputs.map((n) => settle(n % 2 === 0 ? Promise.reject(new Error(`even ${n}`)) : Promise.resolve(n * 100))),
        ),
      { maxBatch: 10, maxInFlight: 1 },
    );
    const results = await Promise.allSettled([1, 2, 3, 4].map((n) => group.submit(n)));
    assert.deepEqual(
      results.map((result) => (result.status === 'fulfilled' ? result.value : (result.reason as Error).message)),
      [100, 'even 2', 300, 'even 4'],
    );
  });

  it('refuses a size below one', () => {
    assert.throws(() => new GroupCommit(async () => [], { maxBatch: 0, maxInFlight: 1 }), RangeError);
  });
});
