// Collection defaults and generators, applied at insert (README: Defaults and generators).

import { randomUUID } from 'node:crypto';
import { cloneJson, setMember, type JsonObject, type JsonValue } from '../../../core/json.ts';

export interface DefaultSources {
  /** The collection's counter, already incremented for this document. */
  auto: () => bigint | number;
  /** The current time in integer nanoseconds since the Unix epoch. */
  now: () => bigint;
}

const AUTO = 'auto()';

/** Whether the defaults contain an `auto()` generator. */
export function usesAuto(defaults: JsonObject | null): boolean {
  if (defaults === null) return false;
  for (const key of Object.keys(defaults)) if (defaults[key] === AUTO) return true;
  return false;
}

/**
 * A new document with the defaults applied where the document's own value is missing or null.
 * A present null is replaced in place; missing members are appended in the defaults' order (a
 * `null` default, which POST $C can store, adds a null member). `next.auto` is called at most
 * once, and only when an `auto()` default is used, so all `auto()` fields get the same number.
 */
export function applyDefaults(document: JsonObject, defaults: JsonObject | null, next: DefaultSources): JsonObject {
  const result: JsonObject = {};
  for (const key of Object.keys(document)) setMember(result, key, document[key] as JsonValue);
  if (defaults === null) return result;
  let auto: bigint | number | undefined;
  for (const key of Object.keys(defaults)) {
    const fallback = defaults[key] as JsonValue;
    if (Object.hasOwn(result, key) && result[key] !== null) continue;
    let value: JsonValue;
    if (fallback === 'uuid()') value = randomUUID();
    else if (fallback === 'unixnano()') value = next.now();
    else if (fallback === AUTO) {
      auto ??= next.auto();
      value = auto;
    }
    // Copied so that documents never share (and could never mutate) the collection's defaults.
    else value = cloneJson(fallback);
    setMember(result, key, value);
  }
  return result;
}

// Date.now() has millisecond resolution and can step backwards; the high-resolution monotonic
// clock, anchored to the wall clock once at load, gives nanosecond values that never decrease.
const anchorWall = BigInt(Date.now()) * 1_000_000n;
const anchorMonotonic = process.hrtime.bigint();

export function unixNanoNow(): bigint {
  return anchorWall + (process.hrtime.bigint() - anchorMonotonic);
}
