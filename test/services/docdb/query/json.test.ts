import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  cloneJson,
  isJsonObject,
  parseJson,
  stringifyJson,
  type JsonObject,
  type JsonValue,
} from '../../../../src/core/json.ts';
import { int, pick, randomValue, seeded, type Random } from './random.ts';

/** Rounds bigints to doubles: what JSON.parse would have produced. */
function asDoubles(value: JsonValue): unknown {
  if (typeof value === 'bigint') return Number(value);
  if (Array.isArray(value)) return value.map(asDoubles);
  if (isJsonObject(value)) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value))
      Object.defineProperty(out, key, {
        value: asDoubles(value[key] as JsonValue),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return out;
  }
  return value;
}

/** Same structure, same key order, -0 kept apart from 0. */
function assertSameAsJsonParse(text: string): void {
  const expected: unknown = JSON.parse(text);
  const actual = asDoubles(parseJson(text));
  assert.deepEqual(actual, expected, text);
  assert.equal(JSON.stringify(actual), JSON.stringify(expected), text);
}

const LONG = '12345678901234567890'; // forces the exact parser

// Random JSON text with long integers, exponents, escapes and odd whitespace.
function randomText(random: Random, depth = 0): string {
  const ws = () => pick(random, ['', '', ' ', '\n', '\t', '\r\n ']);
  switch (int(random, depth > 3 ? 6 : 8)) {
    case 0:
      return pick(random, ['null', 'true', 'false']);
    case 1: {
      const digits = Array.from({ length: 1 + int(random, 25) }, (_, i) =>
        i === 0 ? String(1 + int(random, 9)) : String(int(random, 10)),
      ).join('');
      return (random() < 0.3 ? '-' : '') + pick(random, [digits, '0', digits, digits]);
    }
    case 2: {
      const base = `${random() < 0.3 ? '-' : ''}${1 + int(random, 9)}${'7'.repeat(int(random, 20))}`;
      return base + pick(random, ['.5', '.0', 'e3', 'E-2', 'e+400', '.25e-3', '0', '']);
    }
    case 3:
      return (
        pick(random, [
          '"',
          '"a',
          '"\\u00e9',
          '"\\ud83d\\ude00',
          '"\\ud800',
          '"\\n\\t\\"\\\\\\/\\b\\f\\r',
          '"' + LONG,
          '"é😀',
          '"\u2028',
        ]) + '"'
      );
    case 4:
      return pick(random, [
        '0',
        '-0',
        '0.0',
        '-0.0',
        '9007199254740991',
        '9007199254740992',
        '-9007199254740993',
        '1e16',
        '0e0',
      ]);
    case 5:
      return `"${'x'.repeat(int(random, 3))}"`;
    case 6: {
      const n = int(random, 4);
      return (
        '[' + ws() + Array.from({ length: n }, () => ws() + randomText(random, depth + 1) + ws()).join(',') + ws() + ']'
      );
    }
    default: {
      const n = int(random, 4);
      const keys = ['a', 'b', '__proto__', 'constructor', '1', '', 'é'];
      return (
        '{' +
        ws() +
        Array.from(
          { length: n },
          () => `${ws()}"${pick(random, keys)}"${ws()}:${ws()}${randomText(random, depth + 1)}${ws()}`,
        ).join(',') +
        ws() +
        '}'
      );
    }
  }
}

describe('parseJson', () => {
  it('keeps integers beyond 2^53 exact as bigint', () => {
    assert.equal(parseJson('12345678901234567890'), 12345678901234567890n);
    assert.equal(parseJson('-12345678901234567890'), -12345678901234567890n);
    assert.equal(parseJson('1750000000123456789'), 1750000000123456789n);
    assert.equal(parseJson('9007199254740992'), 9007199254740992n);
    assert.equal(parseJson('-9007199254740992'), -9007199254740992n);
    assert.equal(parseJson('1' + '0'.repeat(400)), 10n ** 400n);
    assert.deepEqual(parseJson('{"t":1750000000123456789,"n":[1,2.5,-3]}'), {
      t: 1750000000123456789n,
      n: [1, 2.5, -3],
    });
  });

  it('keeps safe integers and non-integer literals as numbers', () => {
    assert.equal(parseJson('9007199254740991'), 9007199254740991);
    assert.equal(parseJson('-9007199254740991'), -9007199254740991);
    assert.equal(parseJson('12345678901234567890.5'), Number('12345678901234567890.5'));
    assert.equal(parseJson('12345678901234567890e0'), 1.2345678901234567e19);
    assert.equal(parseJson('1' + '0'.repeat(400) + '.0'), Infinity);
    assert.ok(Object.is((parseJson(`[-0,"${LONG}"]`) as JsonValue[])[0], -0));
  });

  it('leaves digits inside strings alone', () => {
    assert.deepEqual(parseJson(`{"phone":"${LONG}"}`), { phone: LONG });
  });

  it('decodes escapes, unicode and lone surrogates like JSON.parse', () => {
    for (const text of [
      `["${LONG}","\\u00e9\\uD83D\\uDE00\\n\\t\\"\\\\\\/\\b\\f\\r","é😀\u2028\u2029"]`,
      `["${LONG}","\\ud800","\\udc00x","\\uDBFF\\uDFFF"]`,
      `  \n\t\r[${LONG} , { "a" : [ ] , "b" : { } } ]  \n`,
    ]) {
      assertSameAsJsonParse(text);
    }
  });

  it('makes __proto__ an ordinary member and never changes a prototype', () => {
    const parsed = parseJson(`{"__proto__":{"polluted":true},"n":${LONG}}`) as JsonObject;
    assert.equal(Object.getPrototypeOf(parsed), Object.prototype);
    assert.ok(Object.hasOwn(parsed, '__proto__'));
    assert.deepEqual(Object.keys(parsed), ['__proto__', 'n']);
    assert.equal((parsed as Record<string, unknown>).polluted, undefined);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assertSameAsJsonParse(`{"__proto__":1,"a":2,"__proto__":${LONG}}`);
  });

  it('lets a duplicate key keep its first position and its last value', () => {
    const parsed = parseJson(`{"a":1,"b":${LONG},"a":3}`) as JsonObject;
    assert.deepEqual(Object.keys(parsed), ['a', 'b']);
    assert.equal(parsed.a, 3);
  });

  it('rejects everything JSON.parse rejects, with a SyntaxError', () => {
    const bad = [
      '',
      ' ',
      '[',
      ']',
      '{',
      '}',
      '[1,]',
      '{"a":1,}',
      '[,1]',
      '{,}',
      '{a:1}',
      "{'a':1}",
      "'x'",
      '[1 2]',
      '{"a" 1}',
      '{"a":}',
      '{"a"}',
      '[1]]',
      '1 2',
      '01',
      '-01',
      '00',
      '1.',
      '.5',
      '+1',
      '-',
      '--1',
      '1e',
      '1e+',
      '1E-',
      '0x10',
      '1.e5',
      'NaN',
      'Infinity',
      '-Infinity',
      'tru',
      'nul',
      'fals',
      'True',
      'undefined',
      '"abc',
      '"\\x"',
      '"\\u12G4"',
      '"\\u12"',
      '"\\',
      '"a\u0000"',
      '"a\nb"',
      '"\t"',
      '\ufeff1',
      '\u00a01',
      '1\u00a0',
      '/*c*/1',
      '[1,2',
      '{"a":1',
      '{"a":1}x',
      '"\\U0041"',
      '[1,,2]',
      '{"a":1 "b":2}',
    ];
    for (const fragment of bad) {
      for (const text of [`{"n":${LONG},"v":${fragment}}`, `[${fragment},${LONG}]`, fragment + LONG, LONG + fragment]) {
        let native = true;
        try {
          JSON.parse(text);
        } catch {
          native = false;
        }
        if (native) {
          assertSameAsJsonParse(text);
          continue;
        }
        assert.throws(() => parseJson(text), SyntaxError, text);
      }
    }
  });

  it('parses random texts exactly like JSON.parse, bigints aside', () => {
    const random = seeded(3);
    for (let i = 0; i < 4000; i++) assertSameAsJsonParse(`[${LONG},${randomText(random)}]`);
  });

  it('accepts and rejects mutated random texts exactly as JSON.parse does', () => {
    const random = seeded(4);
    const alphabet = [
      '',
      '"',
      ',',
      ':',
      '[',
      ']',
      '{',
      '}',
      '\\',
      '0',
      '5',
      '-',
      '+',
      '.',
      'e',
      ' ',
      'x',
      'u',
      '\u0001',
      'n',
    ];
    let checked = 0;
    for (let i = 0; i < 8000; i++) {
      let text = `{"n":${LONG},"v":${randomText(random)}}`;
      for (let m = 1 + int(random, 2); m > 0; m--) {
        const at = int(random, text.length + 1);
        const cut = int(random, 3);
        text = text.slice(0, at) + pick(random, alphabet) + text.slice(at + cut);
      }
      if (!/[0-9]{16}/.test(text)) continue;
      checked++;
      let expected: unknown;
      try {
        expected = JSON.parse(text);
      } catch {
        assert.throws(() => parseJson(text), SyntaxError, text);
        continue;
      }
      assert.deepEqual(asDoubles(parseJson(text)), expected, text);
    }
    assert.ok(checked > 5000);
  });

  it('handles nesting as deep as JSON.parse does, without recursion', () => {
    const depth = 100000;
    const text = '['.repeat(depth) + LONG + ']'.repeat(depth);
    let value = parseJson(text);
    for (let i = 0; i < depth; i++) value = (value as JsonValue[])[0] as JsonValue;
    assert.equal(value, BigInt(LONG));
    assert.throws(() => parseJson('['.repeat(depth) + LONG + ']'.repeat(depth - 1)), SyntaxError);
  });

  it('uses the native parser when no long digit run is present', () => {
    assert.deepEqual(parseJson('{"a":[1,2.5,"x"],"b":null}'), { a: [1, 2.5, 'x'], b: null });
    assert.equal(parseJson('900719925474099'), 900719925474099);
    assert.throws(() => parseJson('{bad'), SyntaxError);
  });
});

describe('stringifyJson', () => {
  it('writes bigints as exact integer literals', () => {
    assert.equal(stringifyJson(12345678901234567890n), '12345678901234567890');
    assert.equal(
      stringifyJson({ t: 1750000000123456789n, a: [1, -(10n ** 30n)], s: 'x"\n' }),
      '{"t":1750000000123456789,"a":[1,-1000000000000000000000000000000],"s":"x\\"\\n"}',
    );
  });

  it('is compact, keeps key order and writes -0 as 0', () => {
    assert.equal(stringifyJson({ b: 1, a: [true, null, -0, 'é'], c: {} }), '{"b":1,"a":[true,null,0,"é"],"c":{}}');
    assert.equal(stringifyJson({ b: 1n, a: [true, null, -0, 'é'], c: {} }), '{"b":1,"a":[true,null,0,"é"],"c":{}}');
    assert.equal(stringifyJson(-0), '0');
  });

  it('writes a __proto__ member as data', () => {
    const value = parseJson(`{"__proto__":{"x":${LONG}},"y":1}`);
    assert.equal(stringifyJson(value), `{"__proto__":{"x":${LONG}},"y":1}`);
  });

  it('matches JSON.stringify whenever no bigint is present', () => {
    const random = seeded(8);
    for (let i = 0; i < 3000; i++) {
      const value = asDoubles(randomValue(random)) as JsonValue;
      assert.equal(stringifyJson(value), JSON.stringify(value));
    }
  });

  it('round-trips random values through parseJson exactly', () => {
    const random = seeded(9);
    for (let i = 0; i < 3000; i++) {
      const value = randomValue(random);
      const text = stringifyJson(value);
      // Infinity has no JSON form (it is written as null, as JSON.stringify does); skip those.
      if (
        /Infinity/.test(
          JSON.stringify(value, (_k, v: unknown) =>
            typeof v === 'bigint' ? 0 : v === Infinity || v === -Infinity ? 'Infinity' : v,
          ),
        )
      )
        continue;
      const again = parseJson(text);
      assert.equal(stringifyJson(again), text);
      assert.deepEqual(asDoubles(again), JSON.parse(text));
    }
  });
});

describe('helpers', () => {
  it('isJsonObject accepts plain objects only', () => {
    assert.equal(isJsonObject({}), true);
    assert.equal(isJsonObject({ a: 1 }), true);
    for (const v of [null, undefined, [], [1], 'x', 1, 1n, true])
      assert.equal(isJsonObject(v as JsonValue | undefined), false);
  });

  it('cloneJson copies deeply, keeping order and __proto__ members', () => {
    const original = parseJson(`{"b":[{"c":1}],"__proto__":{"d":${LONG}}}`) as JsonObject;
    const copy = cloneJson(original) as JsonObject;
    assert.deepEqual(copy, original);
    assert.deepEqual(Object.keys(copy), ['b', '__proto__']);
    assert.equal(Object.getPrototypeOf(copy), Object.prototype);
    assert.notEqual(copy.b, original.b);
    ((copy.b as JsonValue[])[0] as JsonObject).c = 2;
    assert.equal(((original.b as JsonValue[])[0] as JsonObject).c, 1);
  });
});
