// A direct, unoptimized reading of the filter language (docdb spec §9.2 field paths, §9.3 filters,
// §9.4 for how numbers and strings compare) to check the compiled predicates of
// src/services/docdb/query/filter.ts against.
//
// It imports nothing from src/ but the JSON types: equality, comparison and path lookup are written
// here again, differently from the product's (merge-patch.ts `jsonEquals`, order.ts
// `compareValues`, paths.ts `valueAtPath`), so that a bug there cannot hide in the oracle too.
// Speed does not matter here; obviousness does.

import type { JsonObject, JsonValue } from '../../../../src/core/json.ts';

const isObject = (v: JsonValue | undefined): v is JsonObject =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const isNumber = (v: JsonValue): v is number | bigint => typeof v === 'number' || typeof v === 'bigint';

// ---------------------------------------------------------------------------------------------
// Numbers: exact, whatever mix of doubles and bigints (§9.4: "integer and fractional forms of the
// same value are equal; exact unixnano() integers compare exactly"; -0 equals 0).
//
// Every finite double is a fraction m / 2^k with integer m, so both sides are brought to the form
// (bigint numerator, power-of-two denominator exponent) and compared as integers after scaling to
// a common denominator. No JavaScript mixed bigint/number comparison is involved.
// ---------------------------------------------------------------------------------------------

interface Exact {
  numerator: bigint;
  /** The value is numerator / 2^shift. */
  shift: number;
}

function exact(v: number | bigint): Exact {
  if (typeof v === 'bigint') return { numerator: v, shift: 0 };
  if (!Number.isFinite(v)) throw new Error(`not a JSON number: ${v}`);
  let shift = 0;
  let x = v;
  // Doubling is exact for finite doubles (no overflow: |v| < 2^1024 and at most 1074 doublings
  // make any double an integer, which stays far below the largest double).
  while (!Number.isInteger(x)) {
    x *= 2;
    shift++;
  }
  return { numerator: BigInt(x), shift };
}

/** -1, 0 or 1: a against b by exact mathematical value. */
export function referenceCompareNumbers(a: number | bigint, b: number | bigint): number {
  const x = exact(a);
  const y = exact(b);
  const shift = Math.max(x.shift, y.shift);
  const left = x.numerator << BigInt(shift - x.shift);
  const right = y.numerator << BigInt(shift - y.shift);
  return left === right ? 0 : left < right ? -1 : 1;
}

// ---------------------------------------------------------------------------------------------
// Strings: by Unicode code point (§9.3, §9.4). Array.from splits a string into code points (a lone
// surrogate stays one element, as its own code point U+D800–U+DFFF).
// ---------------------------------------------------------------------------------------------

export function referenceCompareStrings(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0) as number);
  const y = Array.from(b, (c) => c.codePointAt(0) as number);
  for (let i = 0; i < x.length && i < y.length; i++) {
    if (x[i] !== y[i]) return (x[i] as number) < (y[i] as number) ? -1 : 1;
  }
  return x.length === y.length ? 0 : x.length < y.length ? -1 : 1;
}

// ---------------------------------------------------------------------------------------------
// Equality (§9.3 "Equality"): strings exactly, numbers numerically, null, booleans by value; arrays
// same length and equal elements in order; objects the same member names with equal values,
// member order irrelevant. Different kinds are never equal.
// ---------------------------------------------------------------------------------------------

function kind(v: JsonValue): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'bigint') return 'number';
  return typeof v;
}

export function referenceEquals(a: JsonValue, b: JsonValue): boolean {
  const k = kind(a);
  if (k !== kind(b)) return false;
  switch (k) {
    case 'null':
      return true;
    case 'boolean':
    case 'string':
      return a === b;
    case 'number':
      return referenceCompareNumbers(a as number | bigint, b as number | bigint) === 0;
    case 'array': {
      const x = a as JsonValue[];
      const y = b as JsonValue[];
      return x.length === y.length && x.every((element, i) => referenceEquals(element, y[i] as JsonValue));
    }
    default: {
      const x = a as JsonObject;
      const y = b as JsonObject;
      const names = Object.keys(x).sort();
      const others = Object.keys(y).sort();
      if (names.length !== others.length || names.some((name, i) => name !== others[i])) return false;
      return names.every((name) =>
        referenceEquals(
          Object.getOwnPropertyDescriptor(x, name)?.value as JsonValue,
          Object.getOwnPropertyDescriptor(y, name)?.value as JsonValue,
        ),
      );
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Field paths (§9.2): split on `.`; an object member (own members only: `constructor` is not a
// member of `{}`), or on an array the element at a non-negative integer segment within range
// (written canonically: `0`, `12`, not `01` or `+1`). Anything else: missing. The docdb README's
// decision: a non-numeric segment does not continue through an array.
// ---------------------------------------------------------------------------------------------

export const MISSING = Symbol('missing');

export function referenceLookup(value: JsonValue, path: string): JsonValue | typeof MISSING {
  let current: JsonValue = value;
  for (const segment of path.split('.')) {
    if (Array.isArray(current)) {
      const index = Number(segment);
      if (!Number.isInteger(index) || index < 0 || String(index) !== segment || index >= current.length) return MISSING;
      current = current[index] as JsonValue;
    } else if (isObject(current)) {
      const member = Object.getOwnPropertyDescriptor(current, segment);
      if (member === undefined) return MISSING;
      current = member.value as JsonValue;
    } else {
      return MISSING;
    }
  }
  return current;
}

// ---------------------------------------------------------------------------------------------
// Conditions (§9.3).
// ---------------------------------------------------------------------------------------------

/** Whether `condition` holds for `value`. */
export function reference(condition: JsonValue, value: JsonValue): boolean {
  if (!isObject(condition)) {
    // Implicit equality: the value itself, or one element of an array value.
    return (
      referenceEquals(condition, value) ||
      (Array.isArray(value) && value.some((element) => referenceEquals(condition, element)))
    );
  }
  for (const key of Object.keys(condition)) {
    const operand = Object.getOwnPropertyDescriptor(condition, key)?.value as JsonValue;
    if (key.startsWith('$')) {
      if (!referenceOperator(key, operand, value)) return false;
      continue;
    }
    // `path: sub` on an object: sub holds for the value at path (missing → null); on an array:
    // for some element that is an object; on anything else it does not hold.
    const at = (object: JsonValue) => {
      const found = referenceLookup(object, key);
      return reference(operand, found === MISSING ? null : found);
    };
    const holds = isObject(value)
      ? at(value)
      : Array.isArray(value)
        ? value.some((element) => isObject(element) && at(element))
        : false;
    if (!holds) return false;
  }
  return true;
}

function referenceOperator(op: string, operand: JsonValue, value: JsonValue): boolean {
  // Scalar operators hold on an array value when some element does (one level only).
  const someScalar = (test: (v: JsonValue) => boolean) => (Array.isArray(value) ? value.some(test) : test(value));
  // Only values of the operand's kind compare; strings by code point, numbers exactly.
  const compare = (v: JsonValue): number | undefined => {
    if (typeof operand === 'string') return typeof v === 'string' ? referenceCompareStrings(v, operand) : undefined;
    if (isNumber(operand)) return isNumber(v) ? referenceCompareNumbers(v, operand) : undefined;
    throw new Error(`${op}: bad operand ${String(operand)}`);
  };
  const list = () => {
    if (!Array.isArray(operand)) throw new Error(`${op}: operand is not an array`);
    return operand;
  };
  switch (op) {
    case '$eq':
      return reference(operand, value);
    case '$ne':
      return !reference(operand, value);
    case '$gt':
      return someScalar((v) => compare(v) === 1);
    case '$lt':
      return someScalar((v) => compare(v) === -1);
    case '$ge':
    case '$gte':
      return someScalar((v) => {
        const c = compare(v);
        return c === 0 || c === 1;
      });
    case '$le':
    case '$lte':
      return someScalar((v) => {
        const c = compare(v);
        return c === 0 || c === -1;
      });
    case '$in':
      return list().some((element) => reference(element, value));
    case '$nin':
      return !list().some((element) => reference(element, value));
    case '$contains':
      if (typeof operand !== 'string') throw new Error('$contains: operand is not a string');
      return someScalar((v) => typeof v === 'string' && v.indexOf(operand) !== -1);
    case '$and':
      return list().every((element) => reference(element, value));
    case '$or':
      return list().some((element) => reference(element, value));
    default:
      throw new Error(`unknown operator ${op}`);
  }
}
