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

/** How the candidate lines of a slice are found: the pattern whose occurrences are searched for. */
interface Search {
  pattern: Pattern;
  /** Its needles, or its folded literal alone. */
  needles: readonly Buffer[] | null;
  folded: string | null;
  /** The candidates are exactly the matching lines: nothing is left to test. */
  decided: boolean;
}

/**
 * The pattern whose needles pick the candidate lines (the one with the longest shortest needle),
 * or null when none can: then every line is tested. In events the needles are searched for in the
 * JSON line, so only those JSON writes as they are; there a candidate's message is always tested.
 */
function searchFor(kind: 'raw' | 'event', patterns: readonly Pattern[]): Search | null {
  let best: Search | null = null;
  let bestLength = 0;
  for (const pattern of patterns) {
    let length: number;
    if (pattern.needles !== null) {
      if (kind === 'event' && pattern.needles.some((needle) => JSON_ESCAPED.test(needle.toString()))) continue;
      length = Math.min(...pattern.needles.map((needle) => needle.length));
    } else if (pattern.folded !== null) {
      if (kind === 'event' && JSON_ESCAPED.test(pattern.folded)) continue;
      length = pattern.folded.length;
    } else continue;
    if (length > bestLength) {
      bestLength = length;
      best = {
        pattern,
        needles: pattern.needles,
        folded: pattern.needles === null ? pattern.folded : null,
        decided: false,
      };
    }
  }
  if (best) best.decided = kind === 'raw' && patterns.length === 1 && best.pattern.exact;
  return best;
}

/**
 * Where the lines holding a needle start in `data`, in order, found by substring search over the
 * whole slice (lines are only delimited around hits). Null when there are more than `cap`.
 */
function candidateStarts(data: Buffer, search: Search, cap: number): number[] | null {
  const finders: ((from: number) => number)[] = [];
  if (search.needles !== null) for (const needle of search.needles) finders.push((from) => data.indexOf(needle, from));
  else {
    // Latin-1 keeps one character per byte, so offsets are byte offsets; and there JS's
    // case-insensitive (non-Unicode) matching folds ASCII letters with ASCII letters only, which
    // is RE2's folding for every ASCII letter but k and s (excluded from `folded`).
    const text = data.toString('latin1');
    const needle = new RegExp(search.folded!.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&'), 'gi');
    finders.push((from) => {
      needle.lastIndex = from;
      return needle.exec(text)?.index ?? -1;
    });
  }
  const starts: number[] = [];
  for (const find of finders) {
    let at = find(0);
    while (at !== -1) {
      if (starts.length >= cap) return null;
      starts.push(at === 0 ? 0 : data.lastIndexOf(10, at - 1) + 1);
      const end = data.indexOf(10, at);
      if (end === -1) break;
      at = find(end + 1);
    }
  }
  if (finders.length > 1) {
    starts.sort((a, b) => a - b);
    return starts.filter((start, i) => i === 0 || start !== starts[i - 1]);
  }
  return starts;
}

/** Candidates closer than this many bytes apart on average are too many to test line by line. */
const DENSE_BYTES = 1024;

/** `pieces` of `data` copied into one buffer that owns its memory (transferable between threads). */
function gather(data: Buffer, pieces: readonly number[]): Uint8Array {
  let length = 0;
  for (let i = 0; i < pieces.length; i += 2) length += pieces[i + 1]! - pieces[i]!;
  const bytes = new Uint8Array(length);
  let at = 0;
  for (let i = 0; i < pieces.length; i += 2) {
    bytes.set(data.subarray(pieces[i]!, pieces[i + 1]!), at);
    at += pieces[i + 1]! - pieces[i]!;
  }
  return bytes;
}

/**
 * The matching lines among the candidates `starts`: each line is decoded and tested alone (a
 * line's decoding does not depend on its neighbours, `\n` being ASCII), unless the search decided.
 * Null when the candidates hold more than `maxBytes`.
 */
function testCandidates(
  data: Buffer,
  kind: 'raw' | 'event',
  patterns: readonly Pattern[],
  search: Search,
  starts: readonly number[],
  maxBytes: number,
): Uint8Array | null {
  const pieces: number[] = [];
  let bytes = 0;
  for (const start of starts) {
    let end = data.indexOf(10, start);
    end = end === -1 ? data.length : end;
    bytes += end - start;
    if (bytes > maxBytes) return null;
    if (!search.decided) {
      const line = data.toString('utf8', start, end);
      if (!matchesAll(patterns, kind === 'raw' ? line : eventMessage(line))) continue;
    }
    pieces.push(start, Math.min(end + 1, data.length));
  }
  return gather(data, pieces);
}

/**
 * The matching lines of `data` when a needle narrows them down and the work stays small: at most
 * `maxLines` candidate lines of at most `maxBytes` together. Null when it does not apply (no
 * needle) or would cost more: the caller then matches the slice as a whole (in a worker).
 */
export function matchCandidates(
  data: Buffer,
  kind: 'raw' | 'event',
  patterns: readonly Pattern[],
  maxLines: number,
  maxBytes: number,
): Uint8Array | null {
  const search = patterns.length > 0 ? searchFor(kind, patterns) : null;
  if (search === null) return null;
  const starts = candidateStarts(data, search, maxLines);
  return starts && testCandidates(data, kind, patterns, search, starts, maxBytes);
}

/**
 * The matching lines of `data` (whole stored lines, each ending in `\n`), exactly as stored and in
 * order, as one buffer that owns its memory (so it can be transferred between threads).
 */
export function matchLines(data: Buffer, kind: 'raw' | 'event', patterns: readonly Pattern[]): Uint8Array {
  if (patterns.length === 0) return data;
  const search = searchFor(kind, patterns);
  if (search !== null) {
    // Lines tested one by one cost more each than in one decoded text: dense candidates go that way.
    const starts = candidateStarts(data, search, search.decided ? Infinity : Math.max(16, data.length / DENSE_BYTES));
    if (starts !== null) return testCandidates(data, kind, patterns, search, starts, Infinity)!;
  }
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
    for (let start = 0; start < text.length;) start = test(start);
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
