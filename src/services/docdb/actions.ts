/**
 * Colon actions (README: Action routing): the last path segment *as sent* is split at its last
 * `:`; when the text after it names an action of the resource, that is the action and the text
 * before is the resource name. An encoded colon (`%3A`) never splits. Names are then
 * percent-decoded (`+` stays a plus: it is a path, not a form).
 */
export const DATABASE_ACTIONS = ['createApiKey', 'deleteApiKey', 'addOwner', 'deleteOwner'] as const;
export const COLLECTION_ACTIONS = [
  'dropCollection',
  'setDefaults',
  'size',
  'insert',
  'insertStream',
  'insertFullduplex',
  'find',
  'patch',
  'remove',
  'listIndexes',
  'createIndex',
  'getIndex',
  'dropIndex',
] as const;

export type DatabaseAction = (typeof DATABASE_ACTIONS)[number];
export type CollectionAction = (typeof COLLECTION_ACTIONS)[number];

export interface ActionTarget<A extends string> {
  /** The decoded resource name. */
  name: string;
  action: A | null;
}

/** The raw (still encoded) path segments of a request URL, without the query string. */
export function rawSegments(url: string): string[] {
  const query = url.indexOf('?');
  return (query >= 0 ? url.slice(0, query) : url).split('/');
}

/** Null when the segment is not valid percent-encoding (the caller answers 404). */
export function decodeSegment(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

export function splitAction<A extends string>(rawSegment: string, actions: readonly A[]): ActionTarget<A> | null {
  const colon = rawSegment.lastIndexOf(':');
  if (colon >= 0) {
    const suffix = rawSegment.slice(colon + 1);
    if ((actions as readonly string[]).includes(suffix)) {
      const name = decodeSegment(rawSegment.slice(0, colon));
      return name === null ? null : { name, action: suffix as A };
    }
  }
  const name = decodeSegment(rawSegment);
  return name === null ? null : { name, action: null };
}
