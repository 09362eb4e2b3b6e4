/**
 * Conditional and range requests for downloads (the README's decisions on Range, If-None-Match,
 * If-Modified-Since and If-Range, which follow RFC 9110), as pure functions of the request headers
 * and the file's validators.
 */

export interface Validators {
  /** The quoted strong ETag: `"<sha256>"`. */
  etag: string;
  /** Last-Modified in whole seconds since the epoch (what an HTTP date can carry). */
  lastModifiedSeconds: number;
  /** The HTTP date sent as Last-Modified. */
  lastModified: string;
}

/** Entity tags of an If-None-Match / If-Match list, or '*' . */
function parseEtagList(header: string): string[] | '*' {
  if (header.trim() === '*') return '*';
  const tags: string[] = [];
  for (const match of header.matchAll(/(W\/)?"([^"]*)"/g)) tags.push(`"${match[2]}"`);
  return tags;
}

/** An HTTP date in seconds, or null when it does not parse. */
function parseHttpDate(value: string): number | null {
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? null : Math.floor(ms / 1000);
}

/**
 * True when the response is 304 Not Modified: If-None-Match lists the ETag (weak comparison) or is
 * `*`; only without If-None-Match, If-Modified-Since at or after Last-Modified (README: If-Modified-Since).
 */
export function notModified(
  headers: { 'if-none-match'?: string; 'if-modified-since'?: string },
  v: Validators,
): boolean {
  const inm = headers['if-none-match'];
  if (inm !== undefined) {
    const tags = parseEtagList(inm);
    return tags === '*' || tags.includes(v.etag);
  }
  const ims = headers['if-modified-since'];
  if (ims !== undefined) {
    const since = parseHttpDate(ims);
    return since !== null && v.lastModifiedSeconds <= since;
  }
  return false;
}

/**
 * If-Range (README: If-Range): the Range applies only when the condition holds — an entity tag
 * that matches strongly (a weak tag never does), or a date exactly equal to Last-Modified.
 */
export function ifRangeHolds(ifRange: string | undefined, v: Validators): boolean {
  if (ifRange === undefined) return true;
  const value = ifRange.trim();
  if (value.startsWith('W/')) return false;
  if (value.startsWith('"')) return value === v.etag;
  const date = parseHttpDate(value);
  return date !== null && date === v.lastModifiedSeconds;
}

export type RangeOutcome =
  { kind: 'full' } | { kind: 'partial'; start: number; end: number } | { kind: 'unsatisfiable' };

/**
 * Interprets a Range header against a file of `size` bytes. One `bytes=` range → partial (end
 * clamped to the last byte) or unsatisfiable (it starts at or past the end, or a zero suffix);
 * several ranges → the whole file (no multipart answers); anything malformed is ignored (whole file).
 */
export function parseRange(header: string | undefined, size: number): RangeOutcome {
  if (header === undefined) return { kind: 'full' };
  const match = /^\s*bytes\s*=\s*(.*)$/i.exec(header);
  if (!match) return { kind: 'full' };
  const specs = match[1]!
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  if (specs.length !== 1) return { kind: 'full' };
  const spec = /^(\d*)-(\d*)$/.exec(specs[0]!);
  if (!spec) return { kind: 'full' };
  const [, first, last] = spec;
  if (first === '' && last === '') return { kind: 'full' };
  if (first === '') {
    const suffix = Number.isSafeInteger(Number(last)) ? Number(last) : Number.MAX_SAFE_INTEGER;
    if (suffix === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', start: Math.max(0, size - suffix), end: size - 1 };
  }
  // Digits beyond any file size still form a valid range: a huge start is past the end, a huge
  // end is clamped.
  const start = Number.isSafeInteger(Number(first)) ? Number(first) : Number.MAX_SAFE_INTEGER;
  const end = last === '' || !Number.isSafeInteger(Number(last)) ? Number.MAX_SAFE_INTEGER : Number(last);
  if (end < start) return { kind: 'full' };
  if (start >= size) return { kind: 'unsatisfiable' };
  return { kind: 'partial', start, end: Math.min(end, size - 1) };
}
