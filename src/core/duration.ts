// Go duration syntax (`time.ParseDuration` / `Duration.String()`), so config values and API
// parameters read the same as in Go tooling (`300ms`, `1h30m`, `1.5µs`).
//
// Arithmetic is done on bigint nanoseconds and mirrors Go's algorithm step by step (including its
// float64 handling of fractions), so results and overflow limits match Go exactly; only the final
// conversion to `number` can lose precision above 2^53 ns (~104 days).

/** Thrown by {@link parseDuration} for text that Go's `time.ParseDuration` would reject. */
export class DurationError extends Error {
  override name = 'DurationError';
  /** The text that failed to parse. */
  readonly input: string;

  constructor(input: string, reason: string) {
    super(`invalid duration ${JSON.stringify(input)}: ${reason}`);
    this.input = input;
  }
}

const NANOSECOND = 1n;
const MICROSECOND = 1000n * NANOSECOND;
const MILLISECOND = 1000n * MICROSECOND;
const SECOND = 1000n * MILLISECOND;
const MINUTE = 60n * SECOND;
const HOUR = 60n * MINUTE;

const UNITS: ReadonlyMap<string, bigint> = new Map([
  ['ns', NANOSECOND],
  ['us', MICROSECOND],
  ['\u00b5s', MICROSECOND], // MICRO SIGN
  ['\u03bcs', MICROSECOND], // GREEK SMALL LETTER MU
  ['ms', MILLISECOND],
  ['s', SECOND],
  ['m', MINUTE],
  ['h', HOUR],
]);

// Go accumulates the magnitude in a uint64 and allows up to 1<<63 so that -1<<63 still parses.
const MAGNITUDE_LIMIT = 1n << 63n;
const INT64_MAX = MAGNITUDE_LIMIT - 1n;
const INT64_MIN = -MAGNITUDE_LIMIT;

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9';
}

/** Parses a Go duration string into nanoseconds as a bigint (exact). */
function parseNanos(text: string): bigint {
  let i = 0;
  let neg = false;
  const first = text[0];
  if (first === '-' || first === '+') {
    neg = first === '-';
    i = 1;
  }
  // Only a bare zero may omit the unit.
  if (text.slice(i) === '0') return 0n;
  if (i === text.length) throw new DurationError(text, text === '' ? 'empty' : 'missing number');

  let total = 0n;
  while (i < text.length) {
    const c = text[i];
    if (!(c === '.' || isDigit(c))) throw new DurationError(text, 'expected number');

    // Integer part: [0-9]*
    const intStart = i;
    let v = 0n;
    while (isDigit(text[i])) {
      if (v > MAGNITUDE_LIMIT / 10n) throw new DurationError(text, 'overflow');
      v = v * 10n + BigInt(text.charCodeAt(i) - 48);
      if (v > MAGNITUDE_LIMIT) throw new DurationError(text, 'overflow');
      i++;
    }
    const pre = i !== intStart;

    // Fraction: (\.[0-9]*)? — digits beyond int64 precision are ignored, as in Go.
    let f = 0n;
    let scale = 1;
    let post = false;
    if (text[i] === '.') {
      i++;
      const fracStart = i;
      let overflow = false;
      while (isDigit(text[i])) {
        if (!overflow) {
          if (f > INT64_MAX / 10n) {
            overflow = true;
          } else {
            const y = f * 10n + BigInt(text.charCodeAt(i) - 48);
            if (y > MAGNITUDE_LIMIT) overflow = true;
            else {
              f = y;
              scale *= 10;
            }
          }
        }
        i++;
      }
      post = i !== fracStart;
    }
    if (!pre && !post) throw new DurationError(text, 'expected number'); // e.g. ".s"

    // Unit: everything up to the next number, so "1h-2m" reports unit "h-" like Go does.
    const unitStart = i;
    while (i < text.length && !(text[i] === '.' || isDigit(text[i]))) i++;
    if (i === unitStart) throw new DurationError(text, 'missing unit');
    const unitText = text.slice(unitStart, i);
    const unit = UNITS.get(unitText);
    if (unit === undefined) throw new DurationError(text, `unknown unit ${JSON.stringify(unitText)}`);

    if (v > MAGNITUDE_LIMIT / unit) throw new DurationError(text, 'overflow');
    v *= unit;
    if (f > 0n) {
      // Go uses float64 here (exact enough: the product is below one hour in ns); match it bit for bit.
      v += BigInt(Math.trunc(Number(f) * (Number(unit) / scale)));
      if (v > MAGNITUDE_LIMIT) throw new DurationError(text, 'overflow');
    }
    total += v;
    if (total > MAGNITUDE_LIMIT) throw new DurationError(text, 'overflow');
  }
  if (neg) return -total;
  if (total > INT64_MAX) throw new DurationError(text, 'overflow');
  return total;
}

/**
 * Parses Go duration syntax (`300ms`, `-1.5h`, `2h45m`, `0`) into nanoseconds.
 * Throws {@link DurationError} on invalid input or when the value exceeds Go's int64 range.
 */
export function parseDuration(text: string): number {
  return Number(parseNanos(text));
}

/** Like {@link parseDuration} but returns milliseconds (possibly fractional). */
export function parseDurationMs(text: string): number {
  const ns = parseNanos(text);
  // Split before converting so whole milliseconds stay exact for large values.
  return Number(ns / MILLISECOND) + Number(ns % MILLISECOND) / 1e6;
}

/** Go's fmtFrac: `prec` fractional digits of v with trailing zeros (and a lone '.') dropped. */
function fracDigits(v: bigint, prec: number): [string, bigint] {
  let digits = '';
  let print = false;
  for (let k = 0; k < prec; k++) {
    const digit = v % 10n;
    print ||= digit !== 0n;
    if (print) digits = digit.toString() + digits;
    v /= 10n;
  }
  return [print ? `.${digits}` : '', v];
}

/**
 * Formats nanoseconds like Go's `Duration.String()`: `0s`, `1.5µs`, `12.25ms`, `1m30s`,
 * `24h0m0s`. Non-integers are rounded to the nearest nanosecond (halves away from zero); values
 * outside int64 are clamped, since a float cannot always express the exact int64 limits.
 */
export function formatDuration(ns: number): string {
  if (!Number.isFinite(ns)) throw new RangeError(`formatDuration: not a finite number: ${ns}`);
  let d = BigInt(Math.sign(ns) * Math.round(Math.abs(ns)));
  if (d > INT64_MAX) d = INT64_MAX;
  if (d < INT64_MIN) d = INT64_MIN;

  const neg = d < 0n;
  let u = neg ? -d : d;
  let out: string;
  if (u === 0n) return '0s';
  if (u < SECOND) {
    // Below one second Go switches to the largest unit that keeps an integer part.
    let prec: number;
    let suffix: string;
    if (u < MICROSECOND) {
      prec = 0;
      suffix = 'ns';
    } else if (u < MILLISECOND) {
      prec = 3;
      suffix = '\u00b5s';
    } else {
      prec = 6;
      suffix = 'ms';
    }
    const [frac, whole] = fracDigits(u, prec);
    out = `${whole}${frac}${suffix}`;
  } else {
    const [frac, seconds] = fracDigits(u, 9);
    out = `${seconds % 60n}${frac}s`;
    u = seconds / 60n;
    if (u > 0n) {
      out = `${u % 60n}m${out}`;
      u /= 60n;
      // Go stops at hours because days vary in length.
      if (u > 0n) out = `${u}h${out}`;
    }
  }
  return neg ? `-${out}` : out;
}

/** Like {@link formatDuration} but takes milliseconds. */
export function formatDurationMs(ms: number): string {
  return formatDuration(ms * 1e6);
}
