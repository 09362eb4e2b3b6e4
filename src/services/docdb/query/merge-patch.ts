// JSON Merge Patch (RFC 7386) for `:patch` (README: Merge patch).

import { isJsonObject, setMember, type JsonObject, type JsonValue } from '../../../core/json.ts';

/**
 * A new object: the target's members keep their positions, new members are appended in the
 * patch's order. Inputs are never mutated; unchanged members (and array or scalar values taken
 * from the patch) are shared with the inputs rather than copied, so treat results as immutable.
 */
export function mergePatch(target: JsonObject, patch: JsonObject): JsonObject {
  const result: JsonObject = {};
  for (const key of Object.keys(target)) {
    const current = target[key] as JsonValue;
    if (!Object.hasOwn(patch, key)) {
      setMember(result, key, current);
      continue;
    }
    const change = patch[key] as JsonValue;
    if (change === null) continue;
    setMember(result, key, isJsonObject(change) ? mergePatch(isJsonObject(current) ? current : {}, change) : change);
  }
  for (const key of Object.keys(patch)) {
    if (Object.hasOwn(target, key)) continue;
    const change = patch[key] as JsonValue;
    if (change === null) continue;
    // Merging into {} (not copying) drops the nulls nested in a new object, as RFC 7386 does.
    setMember(result, key, isJsonObject(change) ? mergePatch({}, change) : change);
  }
  return result;
}

/** Deep equality: arrays in order, objects whatever their member order, numbers by exact value. */
export function jsonEquals(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (typeof a === 'number' || typeof a === 'bigint') {
    // Exact across number and bigint (no rounding); NaN is not JSON and equals nothing.
    return (typeof b === 'number' || typeof b === 'bigint') && !(a < b) && !(a > b) && a === a && b === b;
  }
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEquals(a[i] as JsonValue, b[i] as JsonValue)) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const key of keys) {
    if (!Object.hasOwn(b, key) || !jsonEquals(a[key] as JsonValue, b[key] as JsonValue)) return false;
  }
  return true;
}
