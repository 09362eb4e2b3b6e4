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
  /**
   * Strings (as UTF-8) of which every matching line holds at least one, so that only lines around
   * their occurrences need testing; null when no such set is certain.
   */
  needles: Buffer[] | null;
  /**
   * `(?i)abc` with an ASCII literal (not k or s, which RE2 also folds to non-ASCII runes): the
   * literal in lower case, which a matching line holds once lower-cased; null otherwise.
   */
  folded: string | null;
  /** A raw line holds one of the needles (or the folded literal) exactly when the pattern matches it. */
  exact: boolean;
  test(line: string): boolean;
}

/** Most needles searched for one pattern: each is a pass over the stored bytes. */
const MAX_NEEDLES = 8;

/** RE2JS's prefilter tree (re2js 2.10): EXACT str, AND/OR of subs. */
interface PrefilterNode {
  type: number;
  str: string;
  subs: PrefilterNode[];
}
const EXACT = 1;
const AND = 2;
const OR = 3;

function isPrefilterNode(value: unknown): value is PrefilterNode {
  const node = value as Partial<PrefilterNode> | null;
  return (
    typeof node === 'object' &&
    node !== null &&
    typeof node.type === 'number' &&
    typeof node.str === 'string' &&
    Array.isArray(node.subs)
  );
}

/**
 * A set of strings every match holds one of, from the prefilter RE2JS computes for the pattern
 * (and checks itself before every unanchored match, so a line without one never matches): an
 * AND keeps its best member, an OR the union of its members'. Null when there is none, or the
 * prefilter is not where re2js 2.10 keeps it (then every line is tested: slower, never wrong).
 */
function requiredStrings(node: unknown): string[] | null {
  if (!isPrefilterNode(node)) return null;
  if (node.type === EXACT) return node.str.length > 0 && !node.str.includes('\n') ? [node.str] : null;
  if (node.type === OR) {
    const union = new Set<string>();
    for (const sub of node.subs) {
      const strings = requiredStrings(sub);
      if (strings === null) return null;
      for (const string of strings) union.add(string);
    }
    return union.size > 0 && union.size <= MAX_NEEDLES ? [...union] : null;
  }
  if (node.type === AND) {
    // The best member: the longest shortest string (fewer false candidates), then the fewest strings.
    let best: string[] | null = null;
    const score = (strings: string[]) => Math.min(...strings.map((string) => string.length));
    for (const sub of node.subs) {
      const strings = requiredStrings(sub);
      if (strings === null) continue;
      if (
        best === null ||
        score(strings) > score(best) ||
        (score(strings) === score(best) && strings.length < best.length)
      )
        best = strings;
    }
    return best;
  }
  return null;
}

/** The prefilter of a compiled pattern, where re2js 2.10 keeps it (`re2Input.prefilter`). */
function prefilterOf(compiled: RE2JS): unknown {
  return (compiled as unknown as { re2Input?: { prefilter?: unknown } }).re2Input?.prefilter;
}

/** `(?i)` then printable ASCII without metacharacters, k or s: see `Pattern.folded`. */
const FOLDED_LITERAL = /^\(\?i\)([\x20-\x7e]+)$/;

function foldedLiteral(source: string): string | null {
  const match = FOLDED_LITERAL.exec(source);
  if (!match || META.test(match[1]!) || /[ks]/i.test(match[1]!)) return null;
  return match[1]!.toLowerCase();
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
  const required = requiredStrings(prefilterOf(compiled));
  const folded = required === null ? foldedLiteral(source) : null;
  const decided = literal !== null ? [literal] : anyOf;
  // Exact when the needles are the literal (or the alternatives) themselves.
  const exact =
    folded !== null ||
    (required !== null &&
      decided !== null &&
      required.length === new Set(decided).size &&
      decided.every((string) => required.includes(string)));
  const needles = required === null ? null : required.map((string) => Buffer.from(string));
  return { source, literal, anyOf, program, needles, folded, exact, test };
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
