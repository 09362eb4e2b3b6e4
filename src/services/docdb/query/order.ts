// The total order of JSON values (README: Total order) and an order-preserving binary encoding of
// it, so that index entries can be kept and range-scanned by plain byte comparison in the database.
//
// Order: null < false < true < numbers < strings < arrays < objects (arrays and objects after
// strings is the suggested choice for the open point). Numbers by exact value (bigint included,
// -0 equals 0); strings by Unicode code point; arrays element by element, a proper prefix first;
// objects by their members sorted by name, name then value pair by pair, fewer members first when
// one is a prefix of the other.
//
// Lone surrogates (valid in JSON text) count as the code points U+D800–U+DFFF, so they sort below
// U+E000 and every distinct string has its own key.

import type { JsonObject, JsonValue } from '../../../core/json.ts';

const enum Rank {
  Null,
  False,
  True,
  Number,
  String,
  Array,
  Object,
}

function rank(v: JsonValue): Rank {
  if (v === null) return Rank.Null;
  switch (typeof v) {
    case 'boolean':
      return v ? Rank.True : Rank.False;
    case 'number':
    case 'bigint':
      return Rank.Number;
    case 'string':
      return Rank.String;
    default:
      return Array.isArray(v) ? Rank.Array : Rank.Object;
  }
}

export function compareValues(a: JsonValue, b: JsonValue): number {
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra < rb ? -1 : 1;
  switch (ra) {
    case Rank.Number:
      return compareNumbers(a as number | bigint, b as number | bigint);
    case Rank.String:
      return compareStrings(a as string, b as string);
    case Rank.Array:
      return compareArrays(a as JsonValue[], b as JsonValue[]);
    case Rank.Object:
      return compareObjects(a as JsonObject, b as JsonObject);
    default:
      return 0;
  }
}

/** Exact: JS compares a bigint with a number by mathematical value. */
export function compareNumbers(a: number | bigint, b: number | bigint): number {
  if (a < b) return -1;
  if (a > b) return 1;
  // NaN is not JSON; should one get here, it sorts after every number so the order stays total.
  const aNaN = a !== a;
  const bNaN = b !== b;
  return aNaN === bNaN ? 0 : aNaN ? 1 : -1;
}

/** Unicode code point order (UTF-16 code unit order differs for U+E000–U+FFFF vs astral). */
export function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Below the surrogates code units are code points; if only one side is at or above 0xD800,
    // both orders agree too (its code point is the larger either way).
    if (x < 0xd800 || y < 0xd800) return x < y ? -1 : 1;
    // Both sides share a[0..i). If this unit may be the low half of a pair started at i-1, compare
    // the code points starting there instead.
    let at = i;
    const previous = i > 0 ? a.charCodeAt(i - 1) : 0;
    if (previous >= 0xd800 && previous <= 0xdbff && (isLowSurrogate(x) || isLowSurrogate(y))) at = i - 1;
    const cx = a.codePointAt(at) as number;
    const cy = b.codePointAt(at) as number;
    return cx < cy ? -1 : 1;
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

function compareArrays(a: JsonValue[], b: JsonValue[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const c = compareValues(a[i] as JsonValue, b[i] as JsonValue);
    if (c !== 0) return c;
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
}

function sortedKeys(o: JsonObject): string[] {
  return Object.keys(o).sort(compareStrings);
}

function compareObjects(a: JsonObject, b: JsonObject): number {
  const ka = sortedKeys(a);
  const kb = sortedKeys(b);
  const n = Math.min(ka.length, kb.length);
  for (let i = 0; i < n; i++) {
    const name = ka[i] as string;
    const other = kb[i] as string;
    const c = compareStrings(name, other);
    if (c !== 0) return c;
    const d = compareValues(a[name] as JsonValue, b[other] as JsonValue);
    if (d !== 0) return d;
  }
  return ka.length === kb.length ? 0 : ka.length < kb.length ? -1 : 1;
}

// ---------------------------------------------------------------------------------------------
// Binary keys.
//
// Every value's encoding is prefix-free (no encoding is a proper prefix of another). That is what
// lets a descending component simply invert its bytes, and lets callers append a suffix (such as an
// insertion sequence) without disturbing the order. Layout:
//
//   null 0x10 · false 0x11 · true 0x12
//   number 0x20, class byte, then for finite non-zero values the magnitude (below)
//   string 0x30, generalized UTF-8 (lone surrogates as 3 bytes) with 0x00 → 01 01 and
//          0x01 → 01 02, then 0x00; the escapes keep 0x00 out of the body, hence prefix-free
//   array  0x40, elements, 0x00 (every element starts with a type byte ≥ 0x10)
//   object 0x50, (string-encoded name, value) pairs sorted by name, 0x00
//
// Magnitude m > 0 is written exactly, whatever its size: with e = floor(log2 m), a 4-byte biased e,
// then the bits of m after its leading 1 (trailing zeros dropped) in groups of 7, each group
// shifted left by one with the low bit set when more groups follow. Equal values therefore have
// equal bytes whether they are doubles or bigints (1 and 1.0 and 1n, -0 and 0), and integers too
// large for a double (up to any size) still order exactly. Negative magnitudes are inverted.
// ---------------------------------------------------------------------------------------------

const TYPE_NULL = 0x10;
const TYPE_FALSE = 0x11;
const TYPE_TRUE = 0x12;
const TYPE_NUMBER = 0x20;
const TYPE_STRING = 0x30;
const TYPE_ARRAY = 0x40;
const TYPE_OBJECT = 0x50;
const END = 0x00;

const NUMBER_NEGATIVE_INFINITY = 0x10;
const NUMBER_NEGATIVE = 0x20;
const NUMBER_ZERO = 0x30;
const NUMBER_POSITIVE = 0x40;
const NUMBER_POSITIVE_INFINITY = 0x50;
const NUMBER_NAN = 0x60;

const EXPONENT_BIAS = 0x80000000;

// One scratch buffer reused across calls; each key is copied out once at the end.
let scratch = Buffer.allocUnsafe(1024);
let length = 0;
const float = new DataView(new ArrayBuffer(8));

function reserve(n: number): void {
  if (length + n <= scratch.length) return;
  let size = scratch.length * 2;
  while (size < length + n) size *= 2;
  const bigger = Buffer.allocUnsafe(size);
  scratch.copy(bigger, 0, 0, length);
  scratch = bigger;
}

function pushByte(b: number): void {
  reserve(1);
  scratch[length++] = b;
}

function invert(from: number): void {
  for (let i = from; i < length; i++) scratch[i] = 0xff - (scratch[i] as number);
}

export function encodeKey(components: readonly JsonValue[], descending: readonly boolean[]): Buffer {
  length = 0;
  for (let i = 0; i < components.length; i++) {
    const start = length;
    encodeValue(components[i] as JsonValue);
    if (descending[i] === true) invert(start);
  }
  const key = Buffer.from(scratch.subarray(0, length));
  // Do not hold on to the memory of one exceptionally large key.
  if (scratch.length > 65536) scratch = Buffer.allocUnsafe(1024);
  return key;
}

function encodeValue(v: JsonValue): void {
  if (v === null) return pushByte(TYPE_NULL);
  switch (typeof v) {
    case 'boolean':
      return pushByte(v ? TYPE_TRUE : TYPE_FALSE);
    case 'number':
    case 'bigint':
      pushByte(TYPE_NUMBER);
      return encodeNumber(v);
    case 'string':
      pushByte(TYPE_STRING);
      return encodeString(v);
  }
  if (Array.isArray(v)) {
    pushByte(TYPE_ARRAY);
    for (const element of v) encodeValue(element);
    return pushByte(END);
  }
  pushByte(TYPE_OBJECT);
  for (const name of sortedKeys(v)) {
    pushByte(TYPE_STRING);
    encodeString(name);
    encodeValue(v[name] as JsonValue);
  }
  pushByte(END);
}

function encodeString(s: string): void {
  // At most 3 bytes per UTF-16 unit (a pair takes 4 bytes for 2 units; an escape 2 for 1).
  reserve(s.length * 3 + 1);
  const buf = scratch;
  let at = length;
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      if (c <= 0x01) {
        buf[at++] = 0x01;
        buf[at++] = c + 1;
      } else {
        buf[at++] = c;
      }
      continue;
    }
    if (c < 0x800) {
      buf[at++] = 0xc0 | (c >> 6);
      buf[at++] = 0x80 | (c & 0x3f);
      continue;
    }
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const low = s.charCodeAt(i + 1);
      if (low >= 0xdc00 && low <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
        i++;
        buf[at++] = 0xf0 | (c >> 18);
        buf[at++] = 0x80 | ((c >> 12) & 0x3f);
        buf[at++] = 0x80 | ((c >> 6) & 0x3f);
        buf[at++] = 0x80 | (c & 0x3f);
        continue;
      }
    }
    // Includes lone surrogates, written as their own 3-byte sequence so they keep their place.
    buf[at++] = 0xe0 | (c >> 12);
    buf[at++] = 0x80 | ((c >> 6) & 0x3f);
    buf[at++] = 0x80 | (c & 0x3f);
  }
  buf[at++] = END;
  length = at;
}

function encodeNumber(v: number | bigint): void {
  if (typeof v === 'number') {
    if (v === 0) return pushByte(NUMBER_ZERO);
    if (v === Infinity) return pushByte(NUMBER_POSITIVE_INFINITY);
    if (v === -Infinity) return pushByte(NUMBER_NEGATIVE_INFINITY);
    if (v !== v) return pushByte(NUMBER_NAN);
    pushByte(v < 0 ? NUMBER_NEGATIVE : NUMBER_POSITIVE);
    const start = length;
    encodeDoubleMagnitude(Math.abs(v));
    if (v < 0) invert(start);
    return;
  }
  if (v === 0n) return pushByte(NUMBER_ZERO);
  const negative = v < 0n;
  const magnitude = negative ? -v : v;
  pushByte(negative ? NUMBER_NEGATIVE : NUMBER_POSITIVE);
  const start = length;
  const asDouble = Number(magnitude);
  // A bigint a double holds exactly takes the double path, so both forms of a value agree.
  if (Number.isFinite(asDouble) && BigInt(asDouble) === magnitude) encodeDoubleMagnitude(asDouble);
  else encodeBigIntMagnitude(magnitude);
  if (negative) invert(start);
}

function pushExponent(e: number): void {
  reserve(4);
  scratch.writeUInt32BE(e + EXPONENT_BIAS, length);
  length += 4;
}

/** m finite and > 0. */
function encodeDoubleMagnitude(m: number): void {
  float.setFloat64(0, m);
  const hi = float.getUint32(0);
  const lo = float.getUint32(4);
  const biased = (hi >>> 20) & 0x7ff;
  let fractionHi = hi & 0xfffff;
  let fractionLo = lo;
  let e: number;
  if (biased !== 0) {
    e = biased - 1023;
  } else {
    // Subnormal: the leading 1 is inside the fraction; shift it out so the rest reads like a
    // normal fraction (subnormals are rare, so BigInt is fine here).
    const f = (BigInt(fractionHi) << 32n) | BigInt(fractionLo);
    const bits = f.toString(2).length;
    e = bits - 1 - 1074;
    const shifted = (f << BigInt(53 - bits)) & ((1n << 52n) - 1n);
    fractionHi = Number(shifted >> 32n);
    fractionLo = Number(shifted & 0xffffffffn);
  }
  pushExponent(e);
  // The 52 fraction bits as a double in [0, 1); ×128 and taking the integer part are exact.
  let rest = (fractionHi * 0x100000000 + fractionLo) / 0x10000000000000;
  if (rest === 0) return pushByte(0x00);
  reserve(8);
  while (rest !== 0) {
    rest *= 128;
    const group = Math.floor(rest);
    rest -= group;
    scratch[length++] = (group << 1) | (rest !== 0 ? 1 : 0);
  }
}

/** m > 0 and not exactly representable as a double. */
function encodeBigIntMagnitude(m: bigint): void {
  const binary = m.toString(2);
  pushExponent(binary.length - 1);
  let end = binary.length;
  while (end > 1 && binary.charCodeAt(end - 1) === 0x30) end--;
  const bits = binary.slice(1, end);
  if (bits.length === 0) return pushByte(0x00);
  reserve(Math.ceil(bits.length / 7));
  for (let i = 0; i < bits.length; i += 7) {
    const group = parseInt(bits.slice(i, i + 7).padEnd(7, '0'), 2);
    scratch[length++] = (group << 1) | (i + 7 < bits.length ? 1 : 0);
  }
}
