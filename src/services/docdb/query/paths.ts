// Field paths (README: Field paths): `address.city`, `tags.0`.
//
// Open point settled here: a non-numeric segment does NOT continue through an array of objects
// (`items.sku` on `{"items":[{"sku":"x"}]}` is missing). Paths stay a plain lookup that names at
// most one value; matching "any element" is the filter's job, and its array rule already gives it:
// `{"items":{"sku":"x"}}` matches that document (README: Filter language).

import type { JsonValue } from '../../../core/json.ts';

export interface CompiledPath {
  readonly segments: readonly string[];
  /** Per segment: the array index it names (canonical non-negative decimal), or -1. */
  readonly indexes: readonly number[];
}

const CANONICAL_INDEX = /^(?:0|[1-9][0-9]*)$/;

/** Splits a path once, so a filter can walk it for every document without re-parsing. */
export function compilePath(path: string): CompiledPath {
  const segments = path.split('.');
  const indexes = segments.map((segment) => (CANONICAL_INDEX.test(segment) ? Number(segment) : -1));
  return { segments, indexes };
}

/** The value at a compiled path, or undefined when the path is missing. */
export function valueAtCompiledPath(value: JsonValue, path: CompiledPath): JsonValue | undefined {
  const { segments, indexes } = path;
  let current: JsonValue = value;
  for (let i = 0; i < segments.length; i++) {
    if (typeof current !== 'object' || current === null) return undefined;
    if (Array.isArray(current)) {
      const index = indexes[i] as number;
      // Numbers too large to be safe integers are never in range, so no precision issue here.
      if (index < 0 || index >= current.length) return undefined;
      current = current[index] as JsonValue;
    } else {
      const segment = segments[i] as string;
      // Own members only: `constructor` or `toString` must not find Object.prototype's.
      if (!Object.hasOwn(current, segment)) return undefined;
      current = current[segment] as JsonValue;
    }
  }
  return current;
}

export function valueAtPath(value: JsonValue, path: string): JsonValue | undefined {
  return valueAtCompiledPath(value, compilePath(path));
}
