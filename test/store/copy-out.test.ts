import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { BinaryCopyDecoder, inlined } from '../../src/store/sql/copy-out.ts';

const header = Buffer.concat([
  Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'),
  Buffer.from([0, 0, 0, 0]), // flags
  Buffer.from([0, 0, 0, 2, 9, 9]), // a header extension of 2 bytes, skipped
]);
const int16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeInt16BE(n);
  return b;
};
const int32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};
const field = (value: Buffer | null) => (value === null ? int32(-1) : Buffer.concat([int32(value.length), value]));
const bigint = (n: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(n);
  return b;
};
const columns = [
  { name: 'id', type: 'bigint' },
  { name: 'name', type: 'text' },
  { name: 'data', type: 'blob' },
] as const;
const row = (id: bigint, name: string | null, data: Buffer | null) =>
  Buffer.concat([int16(3), field(bigint(id)), field(name === null ? null : Buffer.from(name)), field(data)]);

describe('binary COPY decoding', () => {
  it('reads the header, rows of every column type with nulls, and the trailer', () => {
    const decoder = new BinaryCopyDecoder(columns);
    const first = Buffer.concat([header, row(7n, 'ä', Buffer.from([1, 2]))]);
    decoder.push(first);
    decoder.push(row(-3n, null, null));
    assert.equal(decoder.ended, false);
    decoder.push(int16(-1));
    assert.equal(decoder.ended, true);
    assert.deepEqual(decoder.rows, [
      { id: 7, name: 'ä', data: Buffer.from([1, 2]) },
      { id: -3, name: null, data: null },
    ]);
    // The blob is a copy: the message it came in may be reused by the driver.
    first.fill(0);
    assert.deepEqual((decoder.rows[0] as { data: Buffer }).data, Buffer.from([1, 2]));
  });

  it('refuses what is not a binary COPY stream, a row of another shape, a row split across messages', () => {
    assert.throws(() => new BinaryCopyDecoder(columns).push(Buffer.from('id\tname\n')), /not a binary COPY/);
    const wrongCount = new BinaryCopyDecoder(columns);
    assert.throws(() => wrongCount.push(Buffer.concat([header, int16(2), field(bigint(1n)), field(null)])), /2 fields/);
    const split = new BinaryCopyDecoder(columns);
    const whole = row(1n, 'x', Buffer.alloc(100));
    assert.throws(() => split.push(Buffer.concat([header, whole.subarray(0, 50)])), /split/);
    const notBigint = new BinaryCopyDecoder(columns);
    assert.throws(
      () => notBigint.push(Buffer.concat([header, int16(3), field(int32(5)), field(null), field(null)])),
      /not a bigint/,
    );
    const after = new BinaryCopyDecoder(columns);
    after.push(Buffer.concat([header, int16(-1)]));
    assert.throws(() => after.push(row(1n, null, null)), /after the trailer/);
  });

  it('inlines integers and quoted strings only, one per placeholder', () => {
    assert.equal(
      inlined('a = ? and b = ? and c = ?', [5, "it's", 'back\\slash']),
      "a = 5 and b = 'it''s' and c =  E'back\\\\slash'",
    );
    assert.throws(() => inlined('a = ?', [1.5]), TypeError);
    assert.throws(() => inlined('a = ?', [2 ** 60]), TypeError);
    assert.throws(() => inlined('a = ?', [null]), TypeError);
    assert.throws(() => inlined('a = ? and b = ?', [1]), RangeError);
    assert.throws(() => inlined('a = ?', [1, 2]), RangeError);
  });
});
