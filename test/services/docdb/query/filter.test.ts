import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compileFilter, InvalidFilterError } from '../../../../src/services/docdb/query/filter.ts';
import { parseJson, type JsonObject, type JsonValue } from '../../../../src/core/json.ts';
// The oracle has its own equality, number and string comparison and path lookup: it imports none
// of the product's (jsonEquals, compareValues, valueAtPath), so their bugs cannot hide in it.
import {
  MISSING,
  reference,
  referenceCompareNumbers,
  referenceCompareStrings,
  referenceEquals,
  referenceLookup,
} from './filter-reference.ts';
import { int, pick, randomValue, seeded, type Random } from './random.ts';
import {
  COMPARISON_EXAMPLES,
  EXAMPLE_DOCUMENTS,
  FILTER_EXAMPLES,
  FURTHER_EXAMPLES,
  INVALID_FILTER_EXAMPLE,
} from './filter-examples.ts';

// The three documents of spec §9.3.
const [a, b, c] = EXAMPLE_DOCUMENTS;
const abc: JsonObject[] = [a, b, c];

const ids = (filter: unknown, docs: JsonObject[] = abc) => {
  const predicate = compileFilter(filter);
  return docs.filter((doc) => predicate(doc)).map((doc) => doc.id);
};
const show = (v: unknown) => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x)) ?? String(v);
const matches = (filter: unknown, doc: JsonValue) => compileFilter(filter)(doc);

function rejects(filter: unknown, message: string | RegExp): void {
  assert.throws(
    () => compileFilter(filter),
    (error: unknown) => {
      assert.ok(error instanceof InvalidFilterError, `not an InvalidFilterError: ${String(error)}`);
      if (typeof message === 'string') assert.equal(error.message, message);
      else assert.match(error.message, message);
      return true;
    },
    show(filter),
  );
}

describe('compileFilter: the examples of spec §9.3', () => {
  for (const [filter, expected] of [...FILTER_EXAMPLES, ...COMPARISON_EXAMPLES, ...FURTHER_EXAMPLES]) {
    it(JSON.stringify(filter), () => assert.deepEqual(ids(filter), expected));
  }

  it('{"n":{"$regex":"x"}} is invalid', () => rejects(INVALID_FILTER_EXAMPLE, "unknown operator '$regex'"));
});

describe('compileFilter: equality', () => {
  it('compares numbers numerically, bigint included', () => {
    assert.deepEqual(ids({ n: 1.0 }), ['a']);
    assert.deepEqual(ids({ n: 1n }), ['a']);
    assert.deepEqual(ids({ n: { $eq: 2n } }), ['b']);
    const t = parseJson('{"id":"t","t":1750000000123456789,"z":-0}') as JsonObject;
    assert.equal(matches(parseJson('{"t":1750000000123456789}'), t), true);
    assert.equal(matches({ t: 1750000000123456788n }, t), false);
    // The nearest double is a different number; exact values never round into equality.
    assert.equal(matches({ t: 1750000000123456800 }, t), false);
    assert.equal(matches({ z: 0 }, t), true);
    assert.equal(matches({ big: 2 ** 60 }, { big: 2n ** 60n }), true);
    assert.equal(matches({ big: 2n ** 60n }, { big: 2 ** 60 }), true);
  });

  it('compares strings, booleans and null exactly, never across kinds', () => {
    assert.equal(matches({ v: '1' }, { v: 1 }), false);
    assert.equal(matches({ v: 1 }, { v: '1' }), false);
    assert.equal(matches({ v: true }, { v: 1 }), false);
    assert.equal(matches({ v: false }, { v: null }), false);
    assert.equal(matches({ v: false }, {}), false);
    assert.equal(matches({ v: null }, { v: false }), false);
    assert.equal(matches({ v: '' }, {}), false);
    assert.equal(matches({ v: 0 }, { v: null }), false);
    assert.equal(matches({ v: 'Red' }, { v: 'red' }), false);
  });

  it('treats a missing field as null, and only own members count', () => {
    assert.deepEqual(ids({ missing: null }), ['a', 'b', 'c']);
    assert.deepEqual(ids({ 'address.zip': null }), ['b', 'c']);
    assert.deepEqual(ids({ 'tags.5': null }), ['a', 'b', 'c']);
    assert.equal(matches({ constructor: null }, {}), true);
    assert.equal(matches({ toString: { $ne: null } }, {}), false);
    assert.equal(matches({ 'tags.length': 2 }, a), false);
  });

  it('matches arrays exactly or by element', () => {
    assert.deepEqual(ids({ tags: ['blue', 'red'] }), []);
    assert.deepEqual(ids({ tags: ['red'] }), []);
    assert.deepEqual(ids({ tags: 'green' }), ['b']);
    assert.deepEqual(ids({ 'tags.1': 'blue' }), ['a']);
    const m = { m: [[1, 2], [3], 4, null] };
    assert.equal(matches({ m: [3] }, m), true);
    assert.equal(matches({ m: [1, 2] }, m), true);
    assert.equal(matches({ m: 4 }, m), true);
    assert.equal(matches({ m: null }, m), true);
    assert.equal(matches({ m: 3 }, m), false, 'array-any goes one level deep');
    assert.equal(matches({ m: [[1, 2], [3], 4, null] }, m), true);
    assert.equal(matches({ e: [] }, { e: [] }), true);
    assert.equal(matches({ e: [] }, { e: [[]] }), true);
    assert.equal(matches({ e: [] }, { e: [1] }), false);
  });

  it('compares objects inside array literals deeply, member order irrelevant', () => {
    const doc = { pts: [{ y: 2, x: 1n }], nested: [{ a: [1, { b: null }] }] };
    assert.equal(matches({ pts: [{ x: 1, y: 2 }] }, doc), true);
    assert.equal(matches({ pts: [{ x: 1 }] }, doc), false);
    assert.equal(matches({ pts: [{ x: 1, y: 2, z: 3 }] }, doc), false);
    assert.equal(matches({ nested: [{ a: [1, { b: null }] }] }, doc), true);
    assert.equal(matches({ nested: [{ a: [1, {}] }] }, doc), false);
    // Inside a literal, `$` keys are member names, not operators.
    assert.equal(matches({ raw: [{ $gt: 1 }] }, { raw: [{ $gt: 1 }] }), true);
    assert.equal(matches({ raw: [{ $gt: 1 }] }, { raw: [5] }), false);
  });

  it('matches sub-documents partially', () => {
    // An empty condition always holds, even for the null a missing field stands for.
    assert.deepEqual(ids({ address: {} }), ['a', 'b', 'c']);
    assert.deepEqual(ids({ address: { zip: '28001', city: 'Madrid' } }), ['a']);
    assert.deepEqual(ids({ address: { city: 'Madrid', zip: '1' } }), []);
    assert.deepEqual(ids({ address: { city: { $contains: 'ri' } } }), ['a', 'b']);
    assert.deepEqual(ids({ address: { $eq: { city: 'Paris' } } }), ['b']);
    assert.equal(matches({ name: {} }, c), true, '{} holds for any value');
    assert.equal(matches({ n: { x: null } }, c), false, 'a field condition needs an object or an array');
  });

  it('applies a field condition to the elements of an array value', () => {
    const doc: JsonValue = { items: [{ sku: 'x', qty: 2 }, { sku: 'y' }, 'loose', null, [{ sku: 'z' }]] };
    assert.equal(matches({ items: { sku: 'x' } }, doc), true);
    assert.equal(matches({ items: { sku: 'y', qty: null } }, doc), true);
    assert.equal(matches({ items: { sku: 'z' } }, doc), false, 'nested arrays are not searched');
    // Each entry looks for its own element (entries are independent conditions).
    assert.equal(matches({ items: { sku: 'y', qty: 2 } }, doc), true);
    assert.equal(matches({ items: { $and: [{ sku: 'y' }, { qty: 2 }] } }, doc), true);
    // Paths do not continue through arrays with non-numeric segments (paths.ts).
    assert.equal(matches({ 'items.sku': 'x' }, doc), false);
    assert.equal(matches({ 'items.0.sku': 'x' }, doc), true);
    assert.equal(matches({ a: 1 }, [{ a: 1 }]), true);
  });
});

describe('compileFilter: operators', () => {
  it('$gt, $lt, $ge, $le compare within one kind only', () => {
    assert.deepEqual(ids({ n: { $gt: '1' } }), []);
    assert.deepEqual(ids({ name: { $gt: 1 } }), []);
    assert.deepEqual(ids({ name: { $gt: 'B' } }), ['b', 'c']);
    assert.deepEqual(ids({ name: { $ge: 'Bob' } }), ['b', 'c']);
    assert.deepEqual(ids({ name: { $lt: 'Bob' } }), ['a']);
    assert.deepEqual(ids({ name: { $le: 'Bob' } }), ['a', 'b']);
    assert.deepEqual(ids({ missing: { $lt: 1 } }), []);
    assert.deepEqual(ids({ missing: { $gt: '' } }), []);
    assert.deepEqual(ids({ address: { $gt: '' } }), []);
    for (const v of [null, true, false, {}, [], [null], { a: 1 }] as JsonValue[]) {
      assert.equal(matches({ v: { $lt: 10 } }, { v }), false, JSON.stringify(v));
      assert.equal(matches({ v: { $ge: '' } }, { v }), false, JSON.stringify(v));
    }
  });

  it('$gt and friends hold for an array when some element does', () => {
    assert.deepEqual(ids({ tags: { $gt: 'h' } }), ['a']);
    assert.deepEqual(ids({ tags: { $lt: 'c' } }), ['a']);
    assert.equal(matches({ v: { $gt: 2 } }, { v: [1, 'z', 3] }), true);
    assert.equal(matches({ v: { $gt: 3 } }, { v: [1, 'z', 3] }), false);
    assert.equal(matches({ v: { $ge: 3 } }, { v: [1, 'z', 3] }), true);
    assert.equal(matches({ v: { $gt: 2 } }, { v: [[5]] }), false);
  });

  it('compares numbers exactly across bigint and double', () => {
    const doc = { t: 1750000000123456789n };
    assert.equal(matches({ t: { $gt: 1750000000123456788n } }, doc), true);
    assert.equal(matches({ t: { $gt: 1750000000123456789n } }, doc), false);
    assert.equal(matches({ t: { $ge: 1750000000123456789n } }, doc), true);
    assert.equal(matches({ t: { $gt: 1.7e18 } }, doc), true);
    // 1750000000123456800 is the double 1750000000123456768; the next double is …457024.
    assert.equal(matches({ t: { $gt: 1750000000123456800 } }, doc), true);
    assert.equal(matches({ t: { $lt: 1750000000123457000 } }, doc), true);
    assert.equal(matches({ n: { $lt: 2n } }, { n: 1.5 }), true);
    assert.equal(matches({ n: { $le: -0 } }, { n: 0 }), true);
  });

  it('compares strings by code point', () => {
    assert.equal(matches({ s: { $lt: '\u{1F600}' } }, { s: '\uFFFF' }), true);
    assert.equal(matches({ s: { $gt: '\u{1F600}' } }, { s: '\uFFFF' }), false);
    assert.equal(matches({ s: { $gt: 'ab' } }, { s: 'abc' }), true);
    assert.equal(matches({ s: { $gt: 'b' } }, { s: 'abc' }), false);
  });

  it('$ne is the negation of $eq, on arrays: no element matches', () => {
    assert.deepEqual(ids({ tags: { $ne: 'green' } }), ['a', 'c']);
    assert.deepEqual(ids({ tags: { $ne: ['green'] } }), ['a', 'c']);
    assert.deepEqual(ids({ address: { $ne: null } }), ['a', 'b']);
    assert.deepEqual(ids({ address: { $eq: null } }), ['c']);
    assert.deepEqual(ids({ address: { $ne: { city: 'Paris' } } }), ['a', 'c']);
    assert.deepEqual(ids({ n: { $ne: { $gt: 1 } } }), ['a']);
  });

  it('$in and $nin take conditions, operators included', () => {
    assert.deepEqual(ids({ tags: { $in: ['green', 'yellow'] } }), ['b']);
    assert.deepEqual(ids({ tags: { $nin: ['green'] } }), ['a', 'c']);
    assert.deepEqual(ids({ address: { $in: [null] } }), ['c']);
    assert.deepEqual(ids({ n: { $in: [{ $gt: 2 }, 1] } }), ['a', 'c']);
    assert.deepEqual(ids({ n: { $nin: [{ $gt: 2 }, 1] } }), ['b']);
    assert.deepEqual(ids({ address: { $in: [{ city: 'Paris' }, { zip: '28001' }] } }), ['a', 'b']);
    assert.deepEqual(ids({ tags: { $in: [['green']] } }), ['b']);
    assert.deepEqual(ids({ n: { $in: [] } }), []);
    assert.deepEqual(ids({ n: { $nin: [] } }), ['a', 'b', 'c']);
    assert.deepEqual(ids({ n: { $in: [1n, '3'] } }), ['a']);
  });

  it('$contains finds substrings in strings or string elements only', () => {
    assert.deepEqual(ids({ name: { $contains: 'o' } }), ['b', 'c']);
    assert.deepEqual(ids({ name: { $contains: 'AR' } }), []);
    assert.deepEqual(ids({ name: { $contains: '' } }), ['a', 'b', 'c']);
    assert.deepEqual(ids({ tags: { $contains: 'ee' } }), ['b']);
    assert.deepEqual(ids({ missing: { $contains: '' } }), []);
    assert.deepEqual(ids({ n: { $contains: '1' } }), []);
    assert.deepEqual(ids({ address: { $contains: 'Madrid' } }), []);
    assert.equal(matches({ v: { $contains: 'x' } }, { v: [1, null, ['x'], 'axe'] }), true);
    assert.equal(matches({ v: { $contains: 'x' } }, { v: [1, null, ['x']] }), false);
  });

  it('$and and $or, at the top level and on fields, nested', () => {
    assert.deepEqual(ids({ $and: [] }), ['a', 'b', 'c']);
    assert.deepEqual(ids({ $or: [] }), []);
    assert.deepEqual(ids({ n: { $or: [1, 3] } }), ['a', 'c']);
    assert.deepEqual(ids({ n: { $or: [] } }), []);
    assert.deepEqual(ids({ n: { $and: [] } }), ['a', 'b', 'c']);
    assert.deepEqual(ids({ $or: [{ $and: [{ n: { $ge: 2 } }, { tags: 'green' }] }, { 'address.city': 'Madrid' }] }), [
      'a',
      'b',
    ]);
    assert.deepEqual(
      ids({ $and: [{ $or: [{ n: 1 }, { n: 3 }] }, { $or: [{ name: { $contains: 'o' } }, { tags: 'red' }] }] }),
      ['a', 'c'],
    );
    assert.deepEqual(ids({ address: { $or: [{ city: 'Paris' }, { zip: { $contains: '28' } }] } }), ['a', 'b']);
    assert.deepEqual(ids({ n: { $gt: 1 }, $or: [{ name: 'Bob' }, { name: 'Carol' }], tags: { $ne: 'x' } }), ['b', 'c']);
  });

  it('operators apply to the document itself at the top level', () => {
    assert.equal(matches({ $gt: 1 }, a), false);
    assert.equal(matches({ $ne: null }, a), true);
    assert.equal(matches({ $eq: { id: 'a' } }, a), true);
  });
});

describe('compileFilter: validation', () => {
  it('requires an object', () => {
    for (const filter of [null, undefined, [], [{}], 'x', 1, 0, true, 1n]) rejects(filter, 'filter must be an object');
  });

  it('rejects an unknown operator at any depth', () => {
    rejects({ $regex: 'x' }, "unknown operator '$regex'");
    rejects({ n: { $exists: true } }, "unknown operator '$exists'");
    rejects({ $and: [{ n: 1 }, { n: { $foo: 1 } }] }, "unknown operator '$foo'");
    rejects({ $or: [{ $bar: 1 }] }, "unknown operator '$bar'");
    rejects({ n: { $in: [1, { $baz: 2 }] } }, "unknown operator '$baz'");
    rejects({ n: { $nin: [{ x: { $qux: 2 } }] } }, "unknown operator '$qux'");
    rejects({ n: { $eq: { $size: 2 } } }, "unknown operator '$size'");
    rejects({ n: { $ne: { deep: { $nope: 1 } } } }, "unknown operator '$nope'");
    rejects({ address: { city: { $like: 'M%' } } }, "unknown operator '$like'");
    rejects({ n: { $and: [{ $or: [{ $not: 1 }] }] } }, "unknown operator '$not'");
    rejects({ $: 1 }, "unknown operator '$'");
    rejects({ $GT: 1 }, "unknown operator '$GT'");
    rejects({ '$gt.x': 1 }, "unknown operator '$gt.x'");
  });

  it('rejects a bad operand type, naming the operator', () => {
    for (const op of ['$gt', '$lt', '$ge', '$gte', '$le', '$lte']) {
      for (const operand of [null, true, [], [1], {}, { a: 1 }])
        rejects({ n: { [op]: operand } }, `operator '${op}' expects a string or a number`);
    }
    for (const op of ['$in', '$nin', '$and', '$or']) {
      for (const operand of [null, 1, 'x', {}, { 0: 1 }])
        rejects({ n: { [op]: operand } }, `operator '${op}' expects an array`);
    }
    for (const operand of [null, 1, [], ['x'], {}])
      rejects({ n: { $contains: operand } }, "operator '$contains' expects a string");
    rejects({ $or: [{ n: { $in: 1 } }] }, "operator '$in' expects an array");
    rejects({ n: { $in: [{ $gt: null }] } }, "operator '$gt' expects a string or a number");
  });

  it('accepts `$` inside paths and `$` names inside literal values', () => {
    assert.equal(matches({ 'price.$usd': 1 }, { price: { $usd: 1 } }), true);
    assert.doesNotThrow(() => compileFilter({ x: [{ $anything: 1 }] }));
  });

  it('rejects filters nested too deeply instead of overflowing the stack', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100000; i++) deep = { $and: [deep] };
    assert.throws(() => compileFilter(deep), InvalidFilterError);
    let deepLiteral: unknown = 1;
    for (let i = 0; i < 100000; i++) deepLiteral = [deepLiteral];
    assert.throws(() => compileFilter({ x: deepLiteral }), InvalidFilterError);
    let fine: unknown = 1;
    for (let i = 0; i < 50; i++) fine = { $and: [{ a: fine }] };
    assert.doesNotThrow(() => compileFilter(fine));
  });

  it('rejects values that are not JSON', () => {
    assert.throws(() => compileFilter({ x: [undefined] }), InvalidFilterError);
    assert.throws(() => compileFilter({ x: () => 1 }), InvalidFilterError);
  });
});

const SCALARS: JsonValue[] = [
  null,
  true,
  false,
  0,
  -0,
  1,
  1n,
  2,
  2.5,
  -1,
  2n ** 60n,
  2n ** 60n + 1n,
  2 ** 60,
  '',
  'x',
  'xy',
  'y',
  'é',
  '\u{1F600}',
  '\uFFFF',
  '\uD800',
];
const COMMON: JsonValue[] = [null, 1, 'x', 2n ** 60n];
const scalar = (random: Random) => pick(random, random() < 0.6 ? COMMON : SCALARS);
const FIELDS = ['a', 'b', 'c', 'a.b', 'a.0', 'b.a', 'a.1.b', 'a.01'];

function randomDocValue(random: Random, depth: number): JsonValue {
  const roll = int(random, depth > 2 ? 10 : 14);
  if (roll < 10) return scalar(random);
  if (roll < 12) return Array.from({ length: int(random, 4) }, () => randomDocValue(random, depth + 1));
  const object: JsonObject = {};
  for (let i = int(random, 3); i > 0; i--) object[pick(random, ['a', 'b', 'c'])] = randomDocValue(random, depth + 1);
  return object;
}

function randomCondition(random: Random, depth: number): JsonValue {
  const roll = int(random, depth > 2 ? 4 : 10);
  if (roll < 3) return scalar(random);
  if (roll === 3) return Array.from({ length: int(random, 3) }, () => scalar(random));
  const condition: JsonObject = {};
  for (let i = 1 + int(random, 2); i > 0; i--) {
    const kind = int(random, 10);
    if (kind < 3) condition[pick(random, FIELDS)] = randomCondition(random, depth + 1);
    else if (kind === 3) condition[pick(random, ['$eq', '$ne'])] = randomCondition(random, depth + 1);
    else if (kind === 4)
      condition[pick(random, ['$gt', '$lt', '$ge', '$gte', '$le', '$lte'])] = pick(random, [
        0,
        1,
        2,
        1n,
        2.5,
        2 ** 60,
        2n ** 60n + 1n,
        '',
        'x',
        'xy',
        '\uFFFF',
        '\u{1F600}',
      ]);
    else if (kind === 5)
      condition[pick(random, ['$in', '$nin'])] = Array.from({ length: int(random, 3) }, () =>
        randomCondition(random, depth + 1),
      );
    else if (kind === 6) condition.$contains = pick(random, ['', 'x', 'y', 'é']);
    else if (kind === 7) {
      if (random() < 0.5) condition.$ne = scalar(random);
      else condition.$nin = [scalar(random)];
    } else
      condition[pick(random, ['$and', '$or'])] = Array.from({ length: int(random, 3) }, () =>
        randomCondition(random, depth + 1),
      );
  }
  return condition;
}

describe('the reference implementation (filter-reference.ts) itself', () => {
  it('gives the results of spec §9.3 on its three documents', () => {
    for (const [filter, expected] of [...FILTER_EXAMPLES, ...FURTHER_EXAMPLES]) {
      assert.deepEqual(
        abc.filter((doc) => reference(filter, doc)).map((doc) => doc.id),
        expected,
        show(filter),
      );
    }
  });

  it('compares numbers exactly, doubles and bigints alike', () => {
    assert.equal(referenceCompareNumbers(1, 1n), 0);
    assert.equal(referenceCompareNumbers(-0, 0), 0);
    assert.equal(referenceCompareNumbers(0n, -0), 0);
    assert.equal(referenceCompareNumbers(1.5, 2n), -1);
    assert.equal(referenceCompareNumbers(-1.5, -2n), 1);
    assert.equal(referenceCompareNumbers(2 ** 60, 2n ** 60n), 0);
    assert.equal(referenceCompareNumbers(2 ** 60, 2n ** 60n + 1n), -1);
    // 1750000000123456800 is the double 1750000000123456768.
    assert.equal(referenceCompareNumbers(1750000000123456800, 1750000000123456768n), 0);
    assert.equal(referenceCompareNumbers(1750000000123456800, 1750000000123456789n), -1);
    assert.equal(referenceCompareNumbers(5e-324, 0), 1);
    assert.equal(referenceCompareNumbers(-5e-324, 0n), -1);
    assert.equal(referenceCompareNumbers(0.1 + 0.2, 0.3), 1);
    assert.equal(referenceCompareNumbers(Number.MAX_VALUE, 2n ** 1024n), -1);
  });

  it('compares strings by code point', () => {
    assert.equal(referenceCompareStrings('\uFFFF', '\u{1F600}'), -1);
    assert.equal(referenceCompareStrings('\uD800', '\uE000'), -1, 'a lone surrogate is its own code point');
    assert.equal(referenceCompareStrings('\uDBFF', '\u{10000}'), -1, 'UTF-16 code units would say 1');
    assert.equal(referenceCompareStrings('ab', 'abc'), -1);
    assert.equal(referenceCompareStrings('b', 'abc'), 1);
    assert.equal(referenceCompareStrings('é', 'é'), 0);
    assert.equal(referenceCompareStrings('', ''), 0);
  });

  it('compares values for equality deeply, never across kinds', () => {
    assert.equal(referenceEquals({ a: 1, b: [1, { c: null }] }, { b: [1n, { c: null }], a: 1.0 }), true);
    assert.equal(referenceEquals({ a: 1 }, { a: 1, b: null }), false);
    assert.equal(referenceEquals({ 'a\u0000': 1, b: 1 }, { a: 1, '\u0000b': 1 }), false);
    assert.equal(referenceEquals([1, 2], [2, 1]), false);
    assert.equal(referenceEquals([], {}), false);
    assert.equal(referenceEquals(null, false), false);
    assert.equal(referenceEquals(0, false), false);
    assert.equal(referenceEquals('1', 1), false);
    assert.equal(referenceEquals(parseJson('{"__proto__":{"a":1}}'), parseJson('{"__proto__":{"a":1}}')), true);
    assert.equal(referenceEquals(parseJson('{"__proto__":{"a":1}}'), {}), false);
  });

  it('looks paths up as §9.2 and the docdb README say', () => {
    const doc = parseJson('{"a":{"b":[10,{"c":"x"}]},"items":[{"sku":"x"}],"__proto__":{"p":1}}');
    assert.equal(referenceLookup(doc, 'a.b.0'), 10);
    assert.equal(referenceLookup(doc, 'a.b.1.c'), 'x');
    assert.equal(referenceLookup(doc, 'a.b.2'), MISSING);
    assert.equal(referenceLookup(doc, 'a.b.01'), MISSING);
    assert.equal(referenceLookup(doc, 'a.b.-0'), MISSING);
    assert.equal(referenceLookup(doc, 'a.b.length'), MISSING);
    assert.equal(referenceLookup(doc, 'items.sku'), MISSING);
    assert.equal(referenceLookup(doc, 'a.b.0.x'), MISSING);
    assert.equal(referenceLookup(doc, 'constructor'), MISSING);
    assert.equal(referenceLookup(doc, '__proto__.p'), 1);
    assert.equal(referenceLookup({ '': 1 }, ''), 1);
  });
});

describe('compileFilter: evaluation', () => {
  it('agrees with a direct reading of the spec on random filters and documents', () => {
    const random = seeded(42);
    const docs = Array.from({ length: 40 }, () => {
      const doc: JsonObject = {};
      for (const field of ['a', 'b', 'c']) if (random() < 0.8) doc[field] = randomDocValue(random, 0);
      return doc;
    });
    let held = 0;
    let total = 0;
    for (let i = 0; i < 3000; i++) {
      const filter: JsonObject = {};
      for (let k = random() < 0.7 ? 1 : 2; k > 0; k--)
        filter[pick(random, [...FIELDS, '$or', '$and'])] = randomCondition(random, 1);
      if (Array.isArray(filter.$or) === false && '$or' in filter) filter.$or = [filter.$or as JsonValue];
      if (Array.isArray(filter.$and) === false && '$and' in filter) filter.$and = [filter.$and as JsonValue];
      const predicate = compileFilter(filter);
      for (const doc of docs) {
        const expected = reference(filter, doc);
        assert.equal(predicate(doc), expected, `${show(filter)} on ${show(doc)}`);
        total++;
        if (expected) held++;
      }
    }
    // Both outcomes must be well represented for the comparison to mean something.
    assert.ok(held > total * 0.1 && held < total * 0.9, `${held} of ${total}`);
  });

  it('never throws, whatever the document', () => {
    const filters = [
      {},
      { a: 1 },
      { a: { b: { c: null } } },
      { 'a.0.b': { $gt: 1 } },
      { a: { $contains: 'x' } },
      { a: { $in: [null, [1], { b: 1 }] } },
      { $or: [{ a: { $ne: [1, { b: 2 }] } }, { 'a.b': { $lte: 'z' } }] },
      { a: [{ b: 1 }] },
      { $eq: null },
      { $gt: 0 },
    ].map((f) => compileFilter(f));
    const random = seeded(77);
    let deep: JsonValue = 1;
    for (let i = 0; i < 100000; i++) deep = i % 2 === 0 ? [deep] : { a: deep, b: deep };
    const huge = Array.from({ length: 1_000_000 }, (_, i) => i);
    const odd: JsonValue[] = [
      null,
      true,
      false,
      0,
      -0,
      1n,
      '',
      'x',
      [],
      {},
      [null],
      deep,
      { a: deep },
      { a: huge },
      huge,
      parseJson('{"__proto__":{"a":1},"a":{"__proto__":null}}'),
    ];
    for (let i = 0; i < 2000; i++) odd.push(randomValue(random));
    for (const predicate of filters) for (const doc of odd) assert.equal(typeof predicate(doc), 'boolean');
    assert.equal(compileFilter({ a: 999_999 })({ a: huge }), true);
    assert.equal(compileFilter({ a: { $contains: '1' } })({ a: huge }), false);
  });

  it('matches every document with {} and no document with {"$or":[]}', () => {
    const all = compileFilter({});
    const none = compileFilter({ $or: [] });
    for (const doc of [null, true, 0, 'x', [], {}, a]) {
      assert.equal(all(doc), true);
      assert.equal(none(doc), false);
    }
  });

  it('does not depend on the filter object after compiling', () => {
    const filter = { n: { $in: [1, 3] } };
    const predicate = compileFilter(filter);
    filter.n.$in.push(2);
    assert.deepEqual(
      abc.filter((doc) => predicate(doc)).map((doc) => doc.id),
      ['a', 'c'],
    );
  });
});
