import { RE2JS } from 're2js';
import { badRequest } from '../../core/errors.ts';

/** Longest accepted pattern, in characters (logs.md §6.1, open: 1 KiB). */
export const MAX_PATTERN_LENGTH = 1024;
/** Most patterns in one stream. */
export const MAX_PATTERNS = 32;

const META = /[\\^$.|?*+()[\]{}]/;

/** A compiled pattern: RE2JS (linear time), plus the literal itself when it has no metacharacters. */
export interface Pattern {
  source: string;
  literal: string | null;
  /** For `A|B|C` of plain literals: the alternatives; a chunk with none of them has no match. */
  anyOf: string[] | null;
  test(line: string): boolean;
}

/** `ERROR|WARN|FATAL`: every alternative a non-empty literal, so `includes` decides exactly. */
function literalAlternatives(source: string): string[] | null {
  const parts = source.split('|');
  if (parts.length < 2 || parts.some((part) => part.length === 0 || META.test(part))) return null;
  return parts;
}

/**
 * Compiles every `regex` query value before anything is streamed; an invalid one (or one over
 * the length limit) is a 400 `invalid_regex` naming it.
 */
export function compilePatterns(raw: string | string[] | undefined): Pattern[] {
  const sources = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
  if (sources.length > MAX_PATTERNS) throw badRequest('invalid_regex', `at most ${MAX_PATTERNS} regex parameters are allowed`);
  return sources.map((source) => {
    if (source.length > MAX_PATTERN_LENGTH) throw badRequest('invalid_regex', `regex ${JSON.stringify(source.slice(0, 40))}… is longer than ${MAX_PATTERN_LENGTH} characters`);
    let compiled: RE2JS;
    try {
      compiled = RE2JS.compile(source);
    } catch (error) {
      throw badRequest('invalid_regex', `invalid regex ${JSON.stringify(source)}: ${(error as Error).message}`);
    }
    const literal = META.test(source) || source.length === 0 ? null : source;
    const anyOf = literal === null ? literalAlternatives(source) : null;
    let test = (line: string) => compiled.matcher(line).find();
    if (literal !== null) test = (line) => line.includes(literal);
    else if (anyOf !== null) test = (line) => anyOf.some((alternative) => line.includes(alternative));
    return { source, literal, anyOf, test };
  });
}

export function matchesAll(patterns: readonly Pattern[], line: string): boolean {
  for (const pattern of patterns) if (!pattern.test(line)) return false;
  return true;
}
