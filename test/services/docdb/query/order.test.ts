import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { JsonValue } from '../../../../src/core/json.ts';
import { compareStrings, compareValues, encodeKey } from '../../../../src/services/docdb/query/order.ts';
import { int, randomString, randomValue, seeded } from './random.ts';

const sign = (n: number) => (n < 0 ? -1 : n > 0 ? 1 : 0);
const flip = (n: number) => (n === 0 ? 0 : -n);
const key = (value: JsonValue, descending = false) => encodeKey([value], [descending]);
const show = (v: unknown) => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x));

function compareTuples(a: readonly JsonValue[], b: readonly JsonValue[], descending: readonly boolean[]): number {
  for (let i = 0; i < a.length; i++) {
    const c = compareValues(a[i] as JsonValue, b[i] as JsonValue);
    if (c !== 0) return descending[i] ? flip(c) : c;
  }
  return 0;
}

/** Code point order by definition: the string iterator yields code points, lone surrogates alone. */
function referenceStringOrder(a: string, b: string): number {
  const x = [...a].map((c) => c.codePointAt(0) as number);
  const y = [...b].map((c) => c.codePointAt(0) as number);
  for (let i = 0; i < Math.min(x.length, y.length); i++)
    if (x[i] !== y[i]) return (x[i] as number) < (y[i] as number) ? -1 : 1;
  return sign(x.length - y.length);
}

// Strictly increasing under §9.4 (each entry a group of equal values).
const ASCENDING: JsonValue[][] = [
  [null],
  [false],
  [true],
  [-Infinity],
  [-(10n ** 400n) - 1n],
  [-(10n ** 400n)],
  [-Number.MAX_VALUE],
  [-(2n ** 100n) - 1n],
  [-(2n ** 100n), -(2 ** 100)],
  [-(2n ** 53n) - 1n],
  [-(2 ** 53), -(2n ** 53n)],
  [-5, -5n, -5.0],
  [-1.5],
  [-1, -1n],
  [-0.5],
  [-5e-324],
  [0, -0, 0n],
  [5e-324],
  [1e-323],
  [2.225073858507201e-308],
  [2.2250738585072014e-308],
  [0.5],
  [1, 1.0, 1n],
  [1.0000000000000002],
  [1.5],
  [2 ** 53, 2n ** 53n],
  [2n ** 53n + 1n],
  [2 ** 53 + 2, 2n ** 53n + 2n],
  [1750000000123456789n],
  [2n ** 64n - 1n],
  [2 ** 64, 2n ** 64n],
  [2n ** 64n + 1n],
  [1e20, 100000000000000000000n],
  [2n ** 100n],
  [2n ** 100n + 1n],
  [Number.MAX_VALUE],
  [2n ** 1024n],
  [10n ** 400n],
  [10n ** 400n + 1n],
  [Infinity],
  [''],
  ['\u0000'],
  ['\u0000\u0000'],
  ['\u0000\u0001'],
  ['\u0001'],
  ['\u0002'],
  ['A'],
  ['a'],
  ['a\u0000'],
  ['a\u0001'],
  ['ab'],
  ['abc'],
  ['b'],
  ['é'],
  ['\u07ff'],
  ['\u0800'],
  ['\ud7ff'],
  ['\ud800'],
  ['\ud800a'],
  ['\udbff'],
  ['\udc00'],
  ['\udfff'],
  ['\ue000'],
  ['\uffff'],
  ['\ud800\udc00'],
  ['\ud83d\ude00'],
  ['\udbff\udfff'],
  [[]],
  [[null]],
  [[null, null]],
  [[false]],
  [
    [1, 'a'],
    [1n, 'a'],
  ],
  [[1, 'a', null]],
  [[1, 'b']],
  [[2]],
  [['a']],
  [[[]]],
  [[[1]]],
  [[[1], 2]],
  [[[1, 2]]],
  [[{}]],
  [{}],
  [{ '': null }],
  [{ a: null }],
  [{ a: 1 }, { a: 1n }],
  [
    { a: 1, b: 1 },
    { b: 1, a: 1 },
  ],
  [{ a: 1, b: 1, c: null }],
  [{ a: 1, c: null }],
  [{ a: 2 }],
  [{ a: 'x' }],
  [{ a: [] }],
  [{ a: {} }],
  [{ b: 0 }],
  [{ '\uffff': 0 }],
  [{ '\ud83d\ude00': 0 }],
];

describe('compareValues', () => {
  it('orders the sample list: kinds, numbers, strings, arrays, objects', () => {
    const flat = ASCENDING.flatMap((group, rank) => group.map((value) => ({ value, rank })));
    for (const a of flat) {
      for (const b of flat) {
        assert.equal(
          sign(compareValues(a.value, b.value)),
          sign(a.rank - b.rank),
          `${show(a.value)} vs ${show(b.value)}`,
        );
      }
    }
  });

  it('compares strings by code point, not by UTF-16 unit', () => {
    assert.equal(compareValues('\u{1F600}', '\uFFFF'), 1);
    assert.equal(compareValues('\uFFFF', '\u{1F600}'), -1);
    assert.ok('\u{1F600}' < '\uFFFF', 'UTF-16 order is the other way round');
    assert.equal(compareValues('x\u{10000}y', 'x\uE000z'), 1);
  });

  it('agrees with a reference code point order on random strings', () => {
    const random = seeded(7);
    for (let i = 0; i < 20000; i++) {
      const a = randomString(random, 5);
      const b = randomString(random, 5);
      assert.equal(sign(compareStrings(a, b)), referenceStringOrder(a, b), `${show(a)} vs ${show(b)}`);
    }
  });

  it('compares big integers exactly against doubles', () => {
    assert.equal(compareValues(2n ** 53n + 1n, 2 ** 53), 1);
    assert.equal(compareValues(2 ** 53, 2n ** 53n + 1n), -1);
    assert.equal(compareValues(9007199254740993n, 9007199254740992), 1);
    assert.equal(compareValues(10n ** 400n, Infinity), -1);
    assert.equal(compareValues(-(10n ** 400n), -Infinity), 1);
    assert.equal(compareValues(1750000000123456789n, 1750000000123456800n), -1);
  });

  it('is a total order on random values (antisymmetric, consistent with sorting)', () => {
    const random = seeded(11);
    const values = Array.from({ length: 400 }, () => randomValue(random));
    for (let i = 0; i < values.length; i++) {
      for (let j = 0; j < values.length; j += 7) {
        const a = values[i] as JsonValue;
        const b = values[j] as JsonValue;
        assert.equal(sign(compareValues(a, b)), flip(sign(compareValues(b, a))));
      }
    }
    const sorted = [...values].sort(compareValues);
    for (let i = 1; i < sorted.length; i++)
      assert.ok(compareValues(sorted[i - 1] as JsonValue, sorted[i] as JsonValue) <= 0);
  });
});

describe('encodeKey', () => {
  it('orders the sample list exactly as compareValues, ascending and descending', () => {
    const flat = ASCENDING.flatMap((group, rank) => group.map((value) => ({ value, rank })));
    for (const a of flat) {
      for (const b of flat) {
        const expected = sign(a.rank - b.rank);
        assert.equal(
          sign(Buffer.compare(key(a.value), key(b.value))),
          expected,
          `${show(a.value)} vs ${show(b.value)}`,
        );
        assert.equal(
          sign(Buffer.compare(key(a.value, true), key(b.value, true))),
          flip(expected),
          `desc ${show(a.value)} vs ${show(b.value)}`,
        );
      }
    }
  });

  it('gives equal values equal bytes', () => {
    for (const group of ASCENDING) {
      for (const value of group) assert.deepEqual(key(value), key(group[0] as JsonValue), show(group));
    }
    assert.deepEqual(key(-0), key(0));
    assert.deepEqual(key(1.0), key(1n));
    assert.deepEqual(key(2 ** 60), key(2n ** 60n));
    assert.deepEqual(key({ b: [1, { y: 2, x: 1 }], a: null }), key({ a: null, b: [1n, { x: 1, y: 2n }] }));
  });

  it('handles string prefixes and escaped bytes, ascending and descending', () => {
    const lt = (a: JsonValue[], b: JsonValue[], descending: boolean[]) =>
      assert.equal(
        sign(Buffer.compare(encodeKey(a, descending), encodeKey(b, descending))),
        -1,
        `${show(a)} < ${show(b)} with ${show(descending)}`,
      );
    lt(['ab'], ['abc'], [false]);
    lt(['abc'], ['ab'], [true]);
    lt(['a'], ['a\u0000'], [false]);
    lt(['a\u0000'], ['a'], [true]); // the case a plain 00 → 00 FF escape gets wrong when descending
    lt(['a\u0000'], ['a\u0001'], [false]);
    lt(['a\u0001'], ['a\u0000'], [true]);
    lt(['a\u0001'], ['a\u0002'], [false]);
    lt(['ab', 'z'], ['abc', 'a'], [false, false]);
    lt(['abc', 'a'], ['ab', 'z'], [true, false]);
    lt(['ab', 'z'], ['abc', 'a'], [false, true]);
    lt(['a', 'z'], ['a\u0000', 'a'], [false, false]);
    lt(['a\u0000', 'z'], ['a', 'a'], [true, true]);
    lt(['a', null], ['a', false], [true, false]);
    lt(['a', false], ['a', null], [false, true]);
    lt([[1], 2], [[1, 2]], [false, false]);
    lt([[1, 2]], [[1], 2], [true, false]);
    lt([[]], [[null]], [false]);
    lt([[null]], [[]], [true]);
    lt([{ a: 1 }], [{ a: 1, b: 0 }], [false]);
    lt([{ a: 1, b: 0 }], [{ a: 1 }], [true]);
    lt([{ '': 1 }], [{ '\u0000': 0 }], [false]);
    lt(['fruit', 'orange'], ['fruit', 'apple'], [false, true]);
    lt(['drink', 'water'], ['fruit', 'orange'], [false, true]);
  });

  it('orders descending components with null last', () => {
    const keys = [null, false, 1, 'a', [], {}].map((value) => key(value, true));
    for (let i = 1; i < keys.length; i++) assert.equal(Buffer.compare(keys[i - 1] as Buffer, keys[i] as Buffer), 1);
  });

  it('keeps the btree worked example order of spec §9.7', () => {
    const docs = [
      { id: '1', category: 'fruit', product: 'orange' },
      { id: '2', category: 'drink', product: 'water' },
      { id: '3', category: 'drink', product: 'milk' },
      { id: '4', category: 'fruit', product: 'apple' },
    ];
    const order = (descending: boolean[]) =>
      docs
        .map((d) => ({ id: d.id, k: encodeKey([d.category, d.product], descending) }))
        .sort((x, y) => Buffer.compare(x.k, y.k))
        .map((x) => x.id);
    assert.deepEqual(order([false, false]), ['3', '2', '4', '1']);
    assert.deepEqual(order([false, true]), ['2', '3', '1', '4']);
    // A pivot with a missing member counts as null, which sorts first when ascending.
    const from = encodeKey(['fruit', null], [false, false]);
    assert.ok(
      docs
        .filter((d) => d.category === 'fruit')
        .every((d) => Buffer.compare(encodeKey([d.category, d.product], [false, false]), from) > 0),
    );
  });

  it('returns an independent buffer each call', () => {
    const a = encodeKey(['x'.repeat(5000)], [false]);
    const copy = Buffer.from(a);
    encodeKey(['y'.repeat(6000), [1, 2, 3]], [true, false]);
    assert.deepEqual(a, copy);
  });

  it('agrees with compareValues on thousands of random tuples', () => {
    const random = seeded(20240601);
    for (let i = 0; i < 12000; i++) {
      const size = 1 + int(random, 3);
      const descending = Array.from({ length: size }, () => random() < 0.5);
      const a = Array.from({ length: size }, () => randomValue(random));
      // Often share leading components so later components and ties are exercised too.
      const b = a.map((value) => (random() < 0.4 ? value : randomValue(random)));
      const expected = sign(compareTuples(a, b, descending));
      const ka = encodeKey(a, descending);
      const kb = encodeKey(b, descending);
      assert.equal(sign(Buffer.compare(ka, kb)), expected, `${show(a)} vs ${show(b)} with ${show(descending)}`);
      assert.equal(ka.equals(kb), expected === 0);
    }
  });

  it('agrees with compareValues on random numbers and strings (dense collisions)', () => {
    const random = seeded(99);
    const values: JsonValue[] = [];
    for (let i = 0; i < 600; i++) values.push(randomValue(random, 3));
    const keys = values.map((v) => key(v));
    const desc = values.map((v) => key(v, true));
    for (let i = 0; i < values.length; i++) {
      for (let j = i; j < values.length; j++) {
        const expected = sign(compareValues(values[i] as JsonValue, values[j] as JsonValue));
        assert.equal(
          sign(Buffer.compare(keys[i] as Buffer, keys[j] as Buffer)),
          expected,
          `${show(values[i])} vs ${show(values[j])}`,
        );
        assert.equal(sign(Buffer.compare(desc[i] as Buffer, desc[j] as Buffer)), flip(expected));
      }
    }
  });

  it('is prefix-free, so a suffix appended to a key keeps the order', () => {
    const random = seeded(5);
    for (let i = 0; i < 3000; i++) {
      const descending = [random() < 0.5];
      const a = encodeKey([randomValue(random)], descending);
      const b = encodeKey([randomValue(random)], descending);
      if (a.equals(b)) continue;
      const shorter = a.length <= b.length ? a : b;
      const longer = a.length <= b.length ? b : a;
      assert.ok(!longer.subarray(0, shorter.length).equals(shorter), 'one key is a prefix of another');
    }
  });

  it('encodes deeply nested arrays and long strings', () => {
    let nested: JsonValue = 1;
    for (let i = 0; i < 200; i++) nested = [nested];
    assert.equal(key(nested).length, 200 * 2 + key(1).length);
    assert.ok(Buffer.compare(key('z'.repeat(100000)), key('z'.repeat(100001))) < 0);
  });
});
