import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseJson, stringifyJson, type JsonObject, type JsonValue } from '../../../../src/core/json.ts';
import { jsonEquals, mergePatch } from '../../../../src/services/docdb/query/merge-patch.ts';
import { randomValue, seeded } from './random.ts';

/** Compares by text, so key order counts. */
const same = (actual: JsonValue, expected: JsonValue) => assert.equal(stringifyJson(actual), stringifyJson(expected));

describe('mergePatch', () => {
  it('follows the example of spec §11', () => {
    const doc = { id: 'a', tags: ['red'], address: { city: 'Madrid', zip: '28001' } };
    const patch = { address: { zip: null, country: 'ES' }, tags: ['x'] };
    same(mergePatch(doc, patch), { id: 'a', tags: ['x'], address: { city: 'Madrid', country: 'ES' } });
  });

  // RFC 7386 appendix A, applied at the top level of an object.
  const rfc: [string, string, string][] = [
    ['{"a":"b"}', '{"a":"c"}', '{"a":"c"}'],
    ['{"a":"b"}', '{"b":"c"}', '{"a":"b","b":"c"}'],
    ['{"a":"b"}', '{"a":null}', '{}'],
    ['{"a":"b","b":"c"}', '{"a":null}', '{"b":"c"}'],
    ['{"a":["b"]}', '{"a":"c"}', '{"a":"c"}'],
    ['{"a":"c"}', '{"a":["b"]}', '{"a":["b"]}'],
    ['{"a":{"b":"c"}}', '{"a":{"b":"d","c":null}}', '{"a":{"b":"d"}}'],
    ['{"a":[{"b":"c"}]}', '{"a":[1]}', '{"a":[1]}'],
    ['{"e":null}', '{"a":1}', '{"e":null,"a":1}'],
    ['{}', '{"a":{"bb":{"ccc":null}}}', '{"a":{"bb":{}}}'],
    ['{"a":"b"}', '{}', '{"a":"b"}'],
  ];
  for (const [target, patch, expected] of rfc) {
    it(`${target} + ${patch} → ${expected}`, () =>
      same(mergePatch(JSON.parse(target), JSON.parse(patch)), JSON.parse(expected)));
  }

  it('keeps positions of existing keys and appends new ones in the patch order', () => {
    const result = mergePatch({ a: 1, b: 2, c: 3 }, { z: 1, b: 20, y: 2, a: null });
    assert.deepEqual(Object.keys(result), ['b', 'c', 'z', 'y']);
    same(result, { b: 20, c: 3, z: 1, y: 2 });
  });

  it('replaces a non-object member by {} before merging into it', () => {
    for (const current of [null, 1, 'x', true, [1, 2], 5n]) {
      same(mergePatch({ m: current }, { m: { k: 1, gone: null } }), { m: { k: 1 } });
    }
    same(mergePatch({ m: { deep: 'x' } }, { m: { deep: { k: null, v: 1 } } }), { m: { deep: { v: 1 } } });
  });

  it('replaces arrays and scalars entirely, keeps nulls inside arrays', () => {
    same(mergePatch({ a: [1, 2, 3], b: { c: 1 } }, { a: [null, { x: null }], b: 'flat' }), {
      a: [null, { x: null }],
      b: 'flat',
    });
    same(mergePatch({ n: 1 }, { n: 12345678901234567890n }), { n: 12345678901234567890n });
  });

  it('deletes absent members without error and accepts an empty patch', () => {
    same(mergePatch({ a: 1 }, { missing: null, deep: { missing: null } }), { a: 1, deep: {} });
    same(mergePatch({ a: 1 }, {}), { a: 1 });
  });

  it('never mutates its inputs', () => {
    const target = { a: { b: 1, c: [1] }, d: 'x' } as JsonObject;
    const patch = { a: { b: null, e: { f: null, g: 1 } }, d: null, h: { i: null } } as JsonObject;
    const targetText = stringifyJson(target);
    const patchText = stringifyJson(patch);
    const result = mergePatch(target, patch);
    same(result, { a: { c: [1], e: { g: 1 } }, h: {} });
    assert.equal(stringifyJson(target), targetText);
    assert.equal(stringifyJson(patch), patchText);
    assert.notEqual(result, target);
    assert.notEqual(result.a, target.a);
  });

  it('treats __proto__ as an ordinary member', () => {
    const target = parseJson('{"a":1}') as JsonObject;
    const patch = parseJson('{"__proto__":{"polluted":true},"b":2}') as JsonObject;
    const result = mergePatch(target, patch);
    assert.equal(Object.getPrototypeOf(result), Object.prototype);
    assert.equal(stringifyJson(result), '{"a":1,"__proto__":{"polluted":true},"b":2}');
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    const again = mergePatch(result, parseJson('{"__proto__":{"more":1}}') as JsonObject);
    assert.equal(stringifyJson(again), '{"a":1,"__proto__":{"polluted":true,"more":1},"b":2}');
    assert.equal(stringifyJson(mergePatch(again, parseJson('{"__proto__":null}') as JsonObject)), '{"a":1,"b":2}');
    // A target without a __proto__ member must not merge into Object.prototype.
    assert.equal(
      stringifyJson(mergePatch({}, parseJson('{"__proto__":{"x":null,"y":1}}') as JsonObject)),
      '{"__proto__":{"y":1}}',
    );
  });
});

describe('jsonEquals', () => {
  it('compares deeply, member order irrelevant, numbers numerically', () => {
    assert.equal(jsonEquals({ a: 1, b: [1, { c: null }] }, { b: [1.0, { c: null }], a: 1n }), true);
    assert.equal(jsonEquals(-0, 0), true);
    assert.equal(jsonEquals(2 ** 60, 2n ** 60n), true);
    assert.equal(jsonEquals(12345678901234567890n, 12345678901234567890n), true);
    assert.equal(jsonEquals(9007199254740993n, 9007199254740992), false);
    assert.equal(jsonEquals('1', 1), false);
    assert.equal(jsonEquals(null, false), false);
    assert.equal(jsonEquals([], {}), false);
    assert.equal(jsonEquals({}, []), false);
    assert.equal(jsonEquals([1, 2], [2, 1]), false);
    assert.equal(jsonEquals([1], [1, 1]), false);
    assert.equal(jsonEquals({ a: 1 }, { a: 1, b: null }), false);
    assert.equal(jsonEquals({ a: null }, { b: null }), false);
    assert.equal(jsonEquals({ a: undefined } as unknown as JsonValue, { b: undefined } as unknown as JsonValue), false);
  });

  it('detects a patch that changes nothing', () => {
    const doc = { id: 'a', tags: ['red'], n: 1 };
    assert.equal(jsonEquals(mergePatch(doc, { n: 1.0, tags: ['red'], absent: null }), doc), true);
    assert.equal(jsonEquals(mergePatch(doc, { n: 2 }), doc), false);
  });

  it('agrees with itself under copying and reordering on random values', () => {
    const random = seeded(12);
    for (let i = 0; i < 2000; i++) {
      const value = randomValue(random);
      const reordered = reorder(value);
      assert.equal(jsonEquals(value, reordered), true);
      assert.equal(jsonEquals(reordered, value), true);
      const other = randomValue(random);
      assert.equal(jsonEquals(value, other), jsonEquals(other, value));
    }
  });
});

function reorder(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(reorder);
  if (typeof value !== 'object' || value === null) return value;
  const out: JsonObject = {};
  for (const key of Object.keys(value).reverse()) out[key] = reorder(value[key] as JsonValue);
  return out;
}
