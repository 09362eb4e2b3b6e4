import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  DurationError,
  formatDuration,
  formatDurationMs,
  parseDuration,
  parseDurationMs,
} from '../../src/core/duration.ts';

const NS = 1;
const US = 1e3;
const MS = 1e6;
const S = 1e9;
const M = 60 * S;
const H = 60 * M;

const MICRO_SIGN = '\u00b5';
const GREEK_MU = '\u03bc';

// [input, expected nanoseconds]
const valid: Array<[string, number]> = [
  // bare zero, with and without sign
  ['0', 0],
  ['-0', 0],
  ['+0', 0],
  ['0s', 0],
  ['-0s', 0],
  ['0.0h', 0],
  // every unit
  ['1ns', 1 * NS],
  ['1us', 1 * US],
  [`1${MICRO_SIGN}s`, 1 * US],
  [`1${GREEK_MU}s`, 1 * US],
  ['1ms', 1 * MS],
  ['1s', 1 * S],
  ['1m', 1 * M],
  ['1h', 1 * H],
  ['300ms', 300 * MS],
  ['1478s', 1478 * S],
  // sign
  ['-1s', -1 * S],
  ['+5m', 5 * M],
  ['-2m3.4s', -(2 * M + 3.4 * S)],
  // fractions: "1.5", ".5", "1."
  ['1.5h', 1.5 * H],
  ['.5s', 0.5 * S],
  ['1.s', 1 * S],
  ['1.0s', 1 * S],
  ['1.004s', 1004 * MS],
  ['100.00100s', 100 * S + 1 * MS],
  [`1.5${MICRO_SIGN}s`, 1500 * NS],
  ['1.000000001s', 1 * S + 1 * NS],
  ['1.0000000001s', 1 * S], // below 1ns is truncated
  // multi-part
  ['2h45m', 2 * H + 45 * M],
  ['1h2m3.5s', 1 * H + 2 * M + 3.5 * S],
  ['39h9m14.425s', 39 * H + 9 * M + 14.425 * S],
  ['10.5s4m', 4 * M + 10.5 * S], // order and repetition are free in Go
  ['1s1s', 2 * S],
  ['1h1m1s1ms1us1ns', H + M + S + MS + US + NS],
  // Go's float64 fraction handling (cases from Go's own test table)
  ['0.3333333333333333333h', 20 * M],
  ['0.100000000000000000000h', 6 * M],
  ['0.830103483285477580700h', 49 * M + 48 * S + 372539827 * NS],
  ['.9223372036854775807s', 922337203 * NS],
  ['52763797000ns', 52763797000],
  // int64 limits are accepted (the number itself rounds to the nearest double)
  ['9223372036854775807ns', 2 ** 63],
  ['-9223372036854775808ns', -(2 ** 63)],
  ['2562047h47m16.854775807s', 2 ** 63],
  ['-2562047h47m16.854775808s', -(2 ** 63)],
];

test('parseDuration: valid inputs', () => {
  for (const [input, expected] of valid) {
    assert.equal(parseDuration(input), expected, `parseDuration(${JSON.stringify(input)})`);
  }
});

test('parseDuration: never returns negative zero', () => {
  assert.ok(Object.is(parseDuration('-0'), 0));
  assert.ok(Object.is(parseDuration('-0s'), 0));
});

// [input, expected reason in the message]
const invalid: Array<[string, RegExp]> = [
  ['', /empty/],
  ['-', /missing number/],
  ['+', /missing number/],
  ['60', /missing unit/],
  ['00', /missing unit/],
  ['1.5', /missing unit/],
  ['1x', /unknown unit "x"/],
  ['1d', /unknown unit "d"/],
  ['0x', /unknown unit "x"/],
  [`1${MICRO_SIGN}`, /unknown unit/],
  ['1e3s', /unknown unit "e"/],
  ['.s', /expected number/],
  ['-.s', /expected number/],
  ['s', /expected number/],
  ['ms', /expected number/],
  ['1h-2m', /unknown unit "h-"/],
  ['1h+2m', /unknown unit "h\+"/],
  ['--1s', /expected number/],
  ['1.2.3s', /missing unit/],
  [' 1s', /expected number/],
  ['1s ', /unknown unit "s "/],
  ['1 s', /unknown unit " s"/],
  ['1S', /unknown unit "S"/],
  // overflow beyond ±(2^63-1) ns
  ['9999999999h', /overflow/],
  ['3000000h', /overflow/],
  ['9223372036854775808ns', /overflow/],
  ['-9223372036854775809ns', /overflow/],
  ['2562047h47m16.854775808s', /overflow/],
  ['9223372036854775807ns1ns', /overflow/],
  ['99999999999999999999ns', /overflow/],
];

test('parseDuration: invalid inputs throw DurationError', () => {
  for (const [input, reason] of invalid) {
    assert.throws(
      () => parseDuration(input),
      (err: unknown) => {
        assert.ok(err instanceof DurationError, `${JSON.stringify(input)} should throw DurationError`);
        assert.ok(err instanceof Error);
        assert.equal(err.input, input);
        assert.ok(err.message.startsWith(`invalid duration ${JSON.stringify(input)}: `), err.message);
        assert.match(err.message, reason, `message for ${JSON.stringify(input)}`);
        return true;
      },
    );
  }
});

test('parseDuration: error message format', () => {
  assert.throws(() => parseDuration('60'), { name: 'DurationError', message: 'invalid duration "60": missing unit' });
});

test('parseDurationMs returns (fractional) milliseconds', () => {
  assert.equal(parseDurationMs('1.5s'), 1500);
  assert.equal(parseDurationMs('300ms'), 300);
  assert.equal(parseDurationMs('-2m'), -120000);
  assert.equal(parseDurationMs('1ns'), 0.000001);
  assert.equal(parseDurationMs('1.5us'), 0.0015);
  assert.equal(parseDurationMs('0'), 0);
  assert.throws(() => parseDurationMs('5'), DurationError);
});

// [nanoseconds, expected Go Duration.String()]
const formatted: Array<[number, string]> = [
  [0, '0s'],
  [1, '1ns'],
  [999, '999ns'],
  [1000, `1${MICRO_SIGN}s`],
  [1100, `1.1${MICRO_SIGN}s`],
  [1500, `1.5${MICRO_SIGN}s`],
  [210 * US, `210${MICRO_SIGN}s`],
  [999_999, `999.999${MICRO_SIGN}s`],
  [1 * MS, '1ms'],
  [2.2 * MS, '2.2ms'],
  [12.25 * MS, '12.25ms'],
  [999_999_999, '999.999999ms'],
  [1 * S, '1s'],
  [3.3 * S, '3.3s'],
  [32.4 * S, '32.4s'],
  [59 * S + 999_999_999, '59.999999999s'],
  [60 * S, '1m0s'],
  [90 * S, '1m30s'],
  [4 * M + 5 * S, '4m5s'],
  [4 * M + 5001 * MS, '4m5.001s'],
  [8 * M + 1, '8m0.000000001s'],
  [1 * H, '1h0m0s'],
  [1 * H + 0.5 * S, '1h0m0.5s'],
  [5 * H + 6 * M + 7001 * MS, '5h6m7.001s'],
  [24 * H, '24h0m0s'],
  [-1 * S, '-1s'],
  [-1500, `-1.5${MICRO_SIGN}s`],
  [-(1 * H + 30 * M), '-1h30m0s'],
  [-(2 ** 63), '-2562047h47m16.854775808s'],
  // 2^63 is the double nearest to int64 max; it is clamped rather than rejected
  [2 ** 63, '2562047h47m16.854775807s'],
  [1e300, '2562047h47m16.854775807s'],
  // non-integers round to the nearest nanosecond
  [1.4, '1ns'],
  [1.5, '2ns'],
  [-1.5, '-2ns'],
  [0.4, '0s'],
  [-0.4, '0s'],
  [-0, '0s'],
  [1000.6, `1.001${MICRO_SIGN}s`],
];

test('formatDuration matches Go Duration.String()', () => {
  for (const [ns, expected] of formatted) {
    assert.equal(formatDuration(ns), expected, `formatDuration(${ns})`);
  }
});

test('formatDuration rejects non-finite input', () => {
  assert.throws(() => formatDuration(Number.NaN), RangeError);
  assert.throws(() => formatDuration(Number.POSITIVE_INFINITY), RangeError);
});

test('formatDurationMs', () => {
  assert.equal(formatDurationMs(0), '0s');
  assert.equal(formatDurationMs(1.5), '1.5ms');
  assert.equal(formatDurationMs(0.001), `1${MICRO_SIGN}s`);
  assert.equal(formatDurationMs(90_000), '1m30s');
  assert.equal(formatDurationMs(-250), '-250ms');
  assert.equal(formatDurationMs(86_400_000), '24h0m0s');
});

test('formatDuration(parseDuration(x)) round-trips canonical strings', () => {
  const canonical = [
    '0s',
    '1ns',
    `1.5${MICRO_SIGN}s`,
    `210${MICRO_SIGN}s`,
    '12.25ms',
    '999.999999ms',
    '32.4s',
    '1m30s',
    '24h0m0s',
    '1h0m0.5s',
    '4m5.001s',
    '8m0.000000001s',
    '-1s',
    '-1h30m0s',
    '-2562047h47m16.854775808s',
    ...formatted.map(([, s]) => s),
  ];
  for (const s of canonical) {
    assert.equal(formatDuration(parseDuration(s)), s, `round-trip ${s}`);
  }
  // Non-canonical spellings normalise to the canonical one.
  assert.equal(formatDuration(parseDuration(`1${GREEK_MU}s`)), `1${MICRO_SIGN}s`);
  assert.equal(formatDuration(parseDuration('1us')), `1${MICRO_SIGN}s`);
  assert.equal(formatDuration(parseDuration('90s')), '1m30s');
  assert.equal(formatDuration(parseDuration('1.5h')), '1h30m0s');
  assert.equal(formatDuration(parseDuration('-0')), '0s');
});

test('parseDuration(formatDuration(n)) === n for integers in the safe range', () => {
  // Deterministic LCG so a failure is reproducible.
  let seed = 12345;
  const next = (): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let k = 0; k < 2000; k++) {
    const magnitude = 10 ** Math.floor(next() * 16); // 1ns .. ~115 days
    const n = Math.round(next() * magnitude) * (next() < 0.5 ? -1 : 1);
    assert.equal(parseDuration(formatDuration(n)), n === 0 ? 0 : n, `n=${n}`);
  }
});
