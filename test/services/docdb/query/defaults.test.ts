import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { applyDefaults, unixNanoNow, usesAuto } from '../../../../src/services/docdb/query/defaults.ts';
import { parseJson, stringifyJson, type JsonObject, type JsonValue } from '../../../../src/core/json.ts';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

function sources(counter = 1n, now = 1750000000123456789n) {
  const calls = { auto: 0, now: 0 };
  return {
    calls,
    next: {
      auto: () => {
        calls.auto++;
        return counter;
      },
      now: () => {
        calls.now++;
        return now;
      },
    },
  };
}

describe('applyDefaults', () => {
  it('generates a v4 uuid for a missing or null id, keeps an empty one', () => {
    const defaults = { id: 'uuid()' };
    const generated = applyDefaults({}, defaults, sources().next);
    assert.match(generated.id as string, UUID_V4);
    assert.equal((generated.id as string).length, 36);
    assert.match(applyDefaults({ id: null, x: 1 }, defaults, sources().next).id as string, UUID_V4);
    assert.deepEqual(applyDefaults({ id: '' }, defaults, sources().next), { id: '' });
    assert.deepEqual(applyDefaults({ id: 'mine' }, defaults, sources().next), { id: 'mine' });
    const ids = new Set(Array.from({ length: 100 }, () => applyDefaults({}, defaults, sources().next).id));
    assert.equal(ids.size, 100);
  });

  it('keeps present values even when empty', () => {
    const defaults = { s: 'x', f: true, z: 1, a: [1], o: { k: 1 } };
    const doc = { s: '', f: false, z: 0, a: [], o: {} };
    assert.equal(stringifyJson(applyDefaults(doc, defaults, sources().next)), '{"s":"","f":false,"z":0,"a":[],"o":{}}');
  });

  it('copies plain defaults as they are, deeply', () => {
    const defaults = {
      status: 'active',
      n: 0,
      on: false,
      tags: ['a'],
      meta: { v: [1, { w: null }] },
      big: 12345678901234567890n,
      str: 'uuid',
    };
    const result = applyDefaults({}, defaults, sources().next);
    assert.equal(
      stringifyJson(result),
      '{"status":"active","n":0,"on":false,"tags":["a"],"meta":{"v":[1,{"w":null}]},"big":12345678901234567890,"str":"uuid"}',
    );
    assert.notEqual(result.tags, defaults.tags);
    assert.notEqual(result.meta, defaults.meta);
    (result.tags as JsonValue[]).push('b');
    assert.deepEqual(defaults.tags, ['a']);
  });

  it('gives a null default as null, and a present null stays null', () => {
    assert.equal(stringifyJson(applyDefaults({ a: 1 }, { x: null }, sources().next)), '{"a":1,"x":null}');
    assert.equal(stringifyJson(applyDefaults({ x: null, a: 1 }, { x: null }, sources().next)), '{"x":null,"a":1}');
  });

  it('writes unixnano() as an exact integer', () => {
    const { next, calls } = sources(1n, 1750000000123456789n);
    const result = applyDefaults({ keep: 1n }, { t: 'unixnano()', keep: 'unixnano()' }, next);
    assert.equal(result.t, 1750000000123456789n);
    assert.equal(stringifyJson(result), '{"keep":1,"t":1750000000123456789}');
    assert.equal(calls.now, 1);
  });

  it('gives every auto() field of a document the same counter, asking once', () => {
    const { next, calls } = sources(7n);
    const result = applyDefaults({ b: null }, { a: 'auto()', b: 'auto()', c: 'auto()' }, next);
    assert.equal(stringifyJson(result), '{"b":7,"a":7,"c":7}');
    assert.equal(calls.auto, 1);
  });

  it('does not ask for the counter when no auto() field is filled', () => {
    const { next, calls } = sources();
    applyDefaults({ n: 5 }, { n: 'auto()', id: 'uuid()' }, next);
    assert.equal(calls.auto, 0);
  });

  it('follows the auto() example of spec §10', () => {
    // setDefaults {"id":null,"n":"auto()"} leaves {"n":"auto()"}; the caller increments per document.
    let counter = 0n;
    const stored = [{}, {}, {}, {}].map((doc) => {
      counter++;
      return stringifyJson(applyDefaults(doc, { n: 'auto()' }, { auto: () => counter, now: unixNanoNow }));
    });
    assert.deepEqual(stored, ['{"n":1}', '{"n":2}', '{"n":3}', '{"n":4}']);
  });

  it('keeps the document order: nulls replaced in place, missing keys appended in defaults order', () => {
    const result = applyDefaults({ b: null, x: 1, a: null }, { c: 3, a: 'A', d: 4, b: 'B' }, sources().next);
    assert.equal(stringifyJson(result), '{"b":"B","x":1,"a":"A","c":3,"d":4}');
  });

  it('returns a new object and leaves its inputs alone', () => {
    const doc = { id: null, x: { y: 1 } } as JsonObject;
    const defaults = { id: 'uuid()', z: { w: 1 } } as JsonObject;
    const result = applyDefaults(doc, defaults, sources().next);
    assert.notEqual(result, doc);
    assert.deepEqual(doc, { id: null, x: { y: 1 } });
    assert.deepEqual(defaults, { id: 'uuid()', z: { w: 1 } });
    const copy = applyDefaults(doc, null, sources().next);
    assert.notEqual(copy, doc);
    assert.deepEqual(copy, doc);
  });

  it('handles __proto__ as an ordinary member', () => {
    const doc = parseJson('{"__proto__":null}') as JsonObject;
    const result = applyDefaults(doc, parseJson('{"__proto__":{"p":1},"q":"auto()"}') as JsonObject, sources(3n).next);
    assert.equal(Object.getPrototypeOf(result), Object.prototype);
    assert.equal(stringifyJson(result), '{"__proto__":{"p":1},"q":3}');
  });

  it('passes a numeric counter through unchanged', () => {
    assert.equal(applyDefaults({}, { n: 'auto()' }, { auto: () => 42, now: unixNanoNow }).n, 42);
  });
});

describe('usesAuto', () => {
  it('tells whether any default is auto()', () => {
    assert.equal(usesAuto(null), false);
    assert.equal(usesAuto({}), false);
    assert.equal(usesAuto({ id: 'uuid()', t: 'unixnano()', s: 'auto' }), false);
    assert.equal(usesAuto({ id: 'uuid()', n: 'auto()' }), true);
    assert.equal(usesAuto({ nested: { n: 'auto()' } }), false);
  });
});

describe('unixNanoNow', () => {
  it('is the wall clock in exact nanoseconds, 19 digits, never decreasing', () => {
    const before = BigInt(Date.now()) * 1_000_000n;
    let last = unixNanoNow();
    const after = BigInt(Date.now() + 1) * 1_000_000n;
    assert.equal(typeof last, 'bigint');
    assert.equal(String(last).length, 19);
    // Anchored once at load, so allow for drift between the two clocks since then.
    assert.ok(last >= before - 50_000_000n && last <= after + 50_000_000n, `${before} ≤ ${last} ≤ ${after}`);
    const seen = new Set<bigint>();
    for (let i = 0; i < 10000; i++) {
      const now = unixNanoNow();
      assert.ok(now >= last);
      last = now;
      seen.add(now % 1_000_000n);
    }
    assert.ok(seen.size > 1, 'sub-millisecond precision');
  });
});
