import { RE2JS } from 're2js';
import { LogsErrors } from './errors.ts';

/** Longest accepted pattern, in characters (README: the pattern caps among the decisions). */
export const MAX_PATTERN_LENGTH = 1024;
/** Most `regex` parameters in one stream. */
export const MAX_PATTERNS = 16;
/**
 * Largest compiled pattern, in RE2 program instructions. Matching costs up to a few nanoseconds
 * per instruction per byte, so this (with the total below) bounds the work per byte of log:
 * `[0-9a-f]{64}` is 66 instructions, a 1 KiB literal about 1,000; `.{1000}` or `[a-z]{1,1000}`
 * reach it.
 */
export const MAX_PATTERN_PROGRAM = 2_000;
/** Largest total of the compiled patterns of one stream, in RE2 program instructions. */
export const MAX_TOTAL_PROGRAM = 8_000;

const META = /[\\^$.|?*+()[\]{}]/;

/** A compiled pattern: RE2JS (linear time), or substring search for literals. */
export interface Pattern {
  source: string;
  /** The pattern itself when it has no metacharacters: decided with substring search. */
  literal: string | null;
  /** For `A|B|C` of plain literals: the alternatives; a text with none of them has no match. */
  anyOf: string[] | null;
  /** Size of the compiled RE2 program, in instructions. */
  program: number;
  test(line: string): boolean;
}

/** `ERROR|WARN|FATAL`: every alternative a non-empty literal, so `includes` decides exactly. */
function literalAlternatives(source: string): string[] | null {
  const parts = source.split('|');
  if (parts.length < 2 || parts.some((part) => part.length === 0 || META.test(part))) return null;
  return parts;
}

/** Compiles one pattern; throws a 400 `invalid_regex` naming it when it is not accepted. */
export function compilePattern(source: string): Pattern {
  const named = source.length > 60 ? `${JSON.stringify(source.slice(0, 60))}…` : JSON.stringify(source);
  if (source.length > MAX_PATTERN_LENGTH) throw LogsErrors.regexTooLong(named, MAX_PATTERN_LENGTH);
  let compiled: RE2JS;
  try {
    compiled = RE2JS.compile(source);
  } catch (error) {
    throw LogsErrors.regexInvalid(named, (error as Error).message);
  }
  const program = compiled.programSize();
  if (program > MAX_PATTERN_PROGRAM) {
    throw LogsErrors.regexTooComplex(named, program, MAX_PATTERN_PROGRAM);
  }
  const literal = META.test(source) || source.length === 0 ? null : source;
  const anyOf = literal === null ? literalAlternatives(source) : null;
  let test = (line: string) => compiled.test(line);
  if (literal !== null) test = (line) => line.includes(literal);
  else if (anyOf !== null) test = (line) => anyOf.some((alternative) => line.includes(alternative));
  return { source, literal, anyOf, program, test };
}

/**
 * Compiles every `regex` query value before anything is streamed. One that does not compile, is
 * too long or too complex is a 400 `invalid_regex` naming it; too many of them, or too much
 * compiled program together, is a 400 `validation_error`.
 */
export function compilePatterns(raw: string | string[] | undefined): Pattern[] {
  const sources = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
  if (sources.length > MAX_PATTERNS) throw LogsErrors.tooManyRegexes(MAX_PATTERNS, sources.length);
  const patterns = sources.map(compilePattern);
  const total = patterns.reduce((sum, pattern) => sum + pattern.program, 0);
  if (total > MAX_TOTAL_PROGRAM) {
    throw LogsErrors.regexesTooComplex(total, MAX_TOTAL_PROGRAM);
  }
  return patterns;
}

export function matchesAll(patterns: readonly Pattern[], line: string): boolean {
  for (const pattern of patterns) if (!pattern.test(line)) return false;
  return true;
}
