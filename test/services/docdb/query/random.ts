// Seeded generators for the query-engine property tests, so every failure reproduces.
import type { JsonObject, JsonValue } from '../../../../src/core/json.ts';

export type Random = () => number;

/** mulberry32: small, fast, good enough for test data. */
export function seeded(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function pick<T>(random: Random, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}

export function int(random: Random, below: number): number {
  return Math.floor(random() * below);
}

// Few distinct units, so random strings often share prefixes or are equal; every UTF-8 length
// class, the escaped bytes 0x00/0x01, and surrogates paired and alone.
const UNITS = [
  '',
  'a',
  'b',
  '\u0000',
  '\u0001',
  '\u0002',
  'é',
  '\u07ff',
  '\u0800',
  '\ud7ff',
  '\ue000',
  '\uffff',
  '\ud800',
  '\udbff',
  '\udc00',
  '\udfff',
  '\ud83d\ude00',
  '\udbff\udfff',
];

export function randomString(random: Random, maxUnits = 4): string {
  let s = '';
  const n = int(random, maxUnits + 1);
  for (let i = 0; i < n; i++) s += pick(random, UNITS);
  return s;
}

const TWO_53 = 2n ** 53n;

export function randomNumber(random: Random): number | bigint {
  switch (int(random, 10)) {
    case 0:
      return pick(random, [
        0,
        -0,
        0n,
        1,
        -1,
        1n,
        -1n,
        0.5,
        -0.5,
        2 ** 53,
        -(2 ** 53),
        2 ** 64,
        2n ** 64n,
        Infinity,
        -Infinity,
        5e-324,
        -5e-324,
        2.2250738585072014e-308,
        2.225073858507201e-308,
        Number.MAX_VALUE,
      ]);
    case 1:
      return int(random, 7) - 3;
    case 2:
      return (random() - 0.5) * 10;
    case 3:
      return (random() - 0.5) * 2 ** (int(random, 2100) - 1080);
    case 4: {
      // Big integers close to each other and to doubles: 2^k plus a small offset.
      const base = 2n ** BigInt(53 + int(random, 20));
      const value = base + BigInt(int(random, 5) - 2);
      return random() < 0.5 ? value : -value;
    }
    case 5: {
      const value = TWO_53 * BigInt(int(random, 1000)) + BigInt(int(random, 3));
      return random() < 0.5 ? value : -value;
    }
    case 6: {
      // Beyond the double range and beyond what a double difference could express.
      const value = 10n ** BigInt(300 + int(random, 20)) + BigInt(int(random, 3));
      return random() < 0.5 ? value : -value;
    }
    case 7: {
      // The same value as a double and as a bigint.
      const n = int(random, 1000) * 2 ** int(random, 80);
      return random() < 0.5 ? n : BigInt(n);
    }
    default:
      return int(random, 4) / 2 - 1;
  }
}

export function randomValue(random: Random, depth = 0): JsonValue {
  const kind = int(random, depth >= 3 ? 7 : 9);
  switch (kind) {
    case 0:
      return null;
    case 1:
      return false;
    case 2:
      return true;
    case 3:
    case 4:
      return randomNumber(random);
    case 5:
    case 6:
      return randomString(random);
    case 7: {
      const n = int(random, 4);
      const array: JsonValue[] = [];
      for (let i = 0; i < n; i++) array.push(randomValue(random, depth + 1));
      return array;
    }
    default: {
      const n = int(random, 4);
      const object: JsonObject = {};
      for (let i = 0; i < n; i++)
        object[pick(random, ['a', 'b', 'c', '', 'é', '\ud83d\ude00', '\uffff'])] = randomValue(random, depth + 1);
      return object;
    }
  }
}
