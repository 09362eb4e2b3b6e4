import { isUtf8 } from 'node:buffer';
import { matchesAll, type Pattern } from './patterns.ts';

/**
 * Line matching for filter and event streams: a pure function of the stored bytes and the
 * patterns, run on the event loop for small work and in a worker thread otherwise (`filters.ts`).
 */

/** The text a pattern is tested against: a raw line without its `\n`; an event's message. */
function eventMessage(line: string): string {
  try {
    const value = JSON.parse(line) as { message?: unknown };
    return typeof value.message === 'string' ? value.message : '';
  } catch {
    return '';
  }
}

/** Characters JSON.stringify writes escaped: a literal holding one is not found as is in an event's JSON line. */
// eslint-disable-next-line no-control-regex -- control characters are exactly what JSON escapes
const JSON_ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * The literals a matching line must hold one of, for each pattern decided by substring search
 * (a literal, or literal alternatives), when they can be searched for in the stored text.
 */
function requiredLiterals(kind: 'raw' | 'event', patterns: readonly Pattern[]): string[][] {
  const sets: string[][] = [];
  for (const pattern of patterns) {
    const needles = pattern.literal !== null ? [pattern.literal] : pattern.anyOf;
    if (needles === null) continue;
    // An event's message is stored inside JSON: only literals that JSON writes as they are.
    if (kind === 'event' && needles.some((needle) => JSON_ESCAPED.test(needle))) continue;
    sets.push(needles);
  }
  return sets;
}

/** False when some required literal set has no member anywhere in the data: no line can match. */
function mayMatch(data: Buffer, required: readonly string[][]): boolean {
  return required.every((needles) => needles.some((needle) => data.indexOf(needle) !== -1));
}

/**
 * Where the lines holding one of `needles` start in `text`, in order: found by substring search,
 * so sparse matches cost little more than the search itself.
 */
function linesHolding(text: string, needles: readonly string[]): number[] {
  const starts: number[] = [];
  for (const needle of needles) {
    let at = text.indexOf(needle);
    while (at !== -1) {
      const start = text.lastIndexOf('\n', at - 1) + 1;
      starts.push(start);
      const end = text.indexOf('\n', at);
      if (end === -1) break;
      at = text.indexOf(needle, end + 1);
    }
  }
  if (needles.length > 1) {
    starts.sort((a, b) => a - b);
    return starts.filter((start, i) => i === 0 || start !== starts[i - 1]);
  }
  return starts;
}

/**
 * The matching lines of `data` (whole stored lines, each ending in `\n`), exactly as stored and in
 * order, as one buffer that owns its memory (so it can be transferred between threads).
 */
export function matchLines(data: Buffer, kind: 'raw' | 'event', patterns: readonly Pattern[]): Uint8Array {
  if (patterns.length === 0) return data;
  const required = requiredLiterals(kind, patterns);
  if (!mayMatch(data, required)) return new Uint8Array(0);
  if (isUtf8(data)) {
    const text = data.toString('utf8');
    const kept: string[] = [];
    const test = (start: number) => {
      let end = text.indexOf('\n', start);
      if (end === -1) end = text.length;
      const line = text.slice(start, end);
      if (matchesAll(patterns, kind === 'raw' ? line : eventMessage(line)))
        kept.push(end < text.length ? text.slice(start, end + 1) : line);
      return end + 1;
    };
    // With a required literal, only the lines holding it are candidates.
    if (required.length > 0) for (const start of linesHolding(text, required[0]!)) test(start);
    else for (let start = 0; start < text.length;) start = test(start);
    const out = kept.join('');
    const bytes = new Uint8Array(Buffer.byteLength(out));
    Buffer.from(bytes.buffer).write(out);
    return bytes;
  }
  // Not UTF-8: test a decoded copy of each line, keep the stored bytes.
  const kept: Buffer[] = [];
  let length = 0;
  let start = 0;
  while (start < data.length) {
    let end = data.indexOf(10, start);
    if (end === -1) end = data.length;
    const line = data.subarray(start, end).toString('utf8');
    if (matchesAll(patterns, kind === 'raw' ? line : eventMessage(line))) {
      const piece = data.subarray(start, Math.min(end + 1, data.length));
      kept.push(piece);
      length += piece.length;
    }
    start = end + 1;
  }
  const bytes = new Uint8Array(length);
  let at = 0;
  for (const piece of kept) {
    bytes.set(piece, at);
    at += piece.length;
  }
  return bytes;
}
