/**
 * File and bucket timestamps are integer nanoseconds since the Unix epoch. They pass
 * 2^53, so they are `bigint` everywhere: stored as decimal text, written into JSON as exact
 * integers by core's `stringifyJson` without ever becoming a JavaScript number.
 */

/** A source of nanosecond timestamps (tests inject fixed values). */
export type NanoClock = () => bigint;

/**
 * Millisecond wall-clock time × 1,000,000, made strictly increasing within the process: two
 * writes in the same millisecond get distinct, ordered stamps (`updated_timestamp` then orders
 * replacements even when they land in one millisecond).
 */
export function createNanoClock(now: () => number = Date.now): NanoClock {
  let last = 0n;
  return () => {
    let ns = BigInt(now()) * 1_000_000n;
    if (ns <= last) ns = last + 1n;
    last = ns;
    return ns;
  };
}

/** Parses stored decimal text back to a bigint (rejecting anything else loudly). */
export function parseNs(text: string): bigint {
  if (!/^\d{1,20}$/.test(text)) throw new Error(`invalid stored timestamp ${JSON.stringify(text)}`);
  return BigInt(text);
}

/** The whole milliseconds of a nanosecond timestamp, for Date and HTTP dates. */
export function nsToMs(ns: bigint): number {
  return Number(ns / 1_000_000n);
}

/**
 * RFC 3339 UTC with the full sub-second precision the stamp carries (trailing zeros trimmed):
 * `2026-06-21T10:00:00.123456789Z`, or `2026-06-21T10:00:00Z` on a whole second. It is the same
 * instant as the nanosecond integer, so sorting by either agrees.
 */
export function rfc3339Ns(ns: bigint): string {
  const seconds = ns / 1_000_000_000n;
  const fraction = ns % 1_000_000_000n;
  const base = new Date(Number(seconds) * 1000).toISOString().replace(/\.\d{3}Z$/, '');
  if (fraction === 0n) return `${base}Z`;
  return `${base}.${fraction.toString().padStart(9, '0').replace(/0+$/, '')}Z`;
}

/** An HTTP date (`Sat, 21 Jun 2025 12:01:00 GMT`); sub-second precision is dropped, as HTTP does. */
export function httpDate(ns: bigint): string {
  return new Date(nsToMs(ns)).toUTCString();
}
