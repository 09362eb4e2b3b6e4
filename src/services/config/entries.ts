import { ConfigErrors } from './errors.ts';

/** An entries map: free string keys, any JSON value other than null. */
export type Entries = Record<string, unknown>;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The patch a PATCH body stands for (README: Patch body): `{"entries":{…}}` with exactly that one
 * member is the wrapped form; any other object is itself the patch.
 */
export function patchOf(body: unknown): Entries {
  if (!isObject(body)) throw ConfigErrors.bodyNotObject();
  const keys = Object.keys(body);
  if (keys.length === 1 && keys[0] === 'entries' && isObject(body.entries)) return body.entries;
  return body;
}

/**
 * Applies a patch key by key: null deletes, anything else replaces. Built through a Map so that a
 * key such as `__proto__` is an ordinary entry, never a prototype change.
 */
export function mergeEntries(current: Entries, patch: Entries): Entries {
  const merged = new Map(Object.entries(current));
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) merged.delete(key);
    else merged.set(key, value);
  }
  return Object.fromEntries(merged);
}

/** Entries given at creation: null values are dropped, as a patch would. */
export function withoutNulls(entries: Entries): Entries {
  return mergeEntries({}, entries);
}

export function parseEntries(text: string): Entries {
  return JSON.parse(text) as Entries;
}
