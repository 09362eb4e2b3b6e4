import { Pacer } from '../../../../core/pacer.ts';
import { isJsonObject, type JsonObject } from '../../../../core/json.ts';
import { fields } from '../../body.ts';
import { DocdbErrors } from '../../errors.ts';
import { Filter, type DocumentFilters } from '../../filtering.ts';
import { InvalidFilterError } from '../../query/filter.ts';
import { encodeKey } from '../../query/order.ts';
import type { CollectionInfo, DocumentStore, Source } from '../../repository/index.ts';

// The traversal pipeline of find, patch and remove (README: Traversal): check, source, filter,
// skip, limit.

export interface Traversal {
  source: Source;
  filter: Filter | null;
  skip: number;
  /** Negative: no limit. */
  limit: number;
}

/** The body fields every source uses; checked before the collection is looked up (README: Traversal, step 1). */
export function traversalFields(body: JsonObject): { indexName: string | null; skip: number; limit: number } {
  const indexName = body.index === undefined || body.index === null ? null : body.index;
  if (indexName !== null && typeof indexName !== 'string') throw DocdbErrors.fieldType('index', 'a string or null');
  return { indexName, skip: fields.integer(body, 'skip', 0), limit: fields.integer(body, 'limit', 1) };
}

/** The source (full scan, map lookup or btree range) and the compiled filter of a traversal body. */
export function parseTraversal(body: JsonObject, collection: CollectionInfo): Traversal {
  const { indexName, skip, limit } = traversalFields(body);
  let source: Source = { kind: 'scan' };
  if (indexName !== null) {
    const index = collection.indexes.find((candidate) => candidate.name === indexName);
    if (!index) throw DocdbErrors.indexNotFound(indexName, collection.name);
    if (index.type === 'map') {
      const value = body.value === undefined ? '' : body.value;
      if (typeof value !== 'string') throw DocdbErrors.fieldType('value', 'a string');
      source = { kind: 'map', index, key: encodeKey([value], [false]) };
    } else {
      const reverse = fields.boolean(body, 'reverse', false);
      const pivot = (name: 'from' | 'to') => {
        const value = body[name];
        if (value === undefined) return null;
        if (!isJsonObject(value)) throw DocdbErrors.fieldType(name, 'an object');
        return encodeKey(
          index.keyFields.map((field) => (Object.hasOwn(value, field) ? value[field]! : null)),
          index.descending,
        );
      };
      source = { kind: 'btree', index, from: pivot('from'), to: pivot('to'), reverse };
    }
  }
  const value = body.filter === undefined ? {} : body.filter;
  let filter: Filter | null = null;
  if (!(isJsonObject(value) && Object.keys(value).length === 0)) {
    try {
      filter = new Filter(value);
    } catch (error) {
      if (error instanceof InvalidFilterError) throw DocdbErrors.invalidFilter(error.message);
      throw error;
    }
  }
  return { source, filter, skip: Math.max(0, skip), limit };
}

/** Selected documents handed to `act` at once, in bytes of JSON (at least one document). */
const ACT_BYTES = 1024 * 1024;
/**
 * The clock is read once this much work has been done since the last look: a document counts its
 * JSON bytes (times the filter's weight) plus 1 KiB, so small documents are looked at every few
 * hundred and costly ones every time.
 */
const WORK_PER_LOOK = 256 * 1024;

/**
 * Runs the pipeline, handing the selected documents to `act` (at most about ACT_BYTES at a time),
 * which returns whether to go on. Stops reading as soon as the limit is reached. The event loop
 * gets a turn every few milliseconds of work (filter tests included), whether or not anything is
 * selected; documents too costly to test here are tested in a worker (filtering.ts).
 */
export async function traverse(
  documents: DocumentStore,
  filters: DocumentFilters,
  collection: CollectionInfo,
  traversal: Traversal,
  act: (selected: { seq: number; body: string }[]) => Promise<boolean>,
  options: { upToSeq?: number; skipSeqs?: Set<number>; stopped?: () => boolean } = {},
): Promise<void> {
  let skip = traversal.skip;
  let remaining = traversal.limit < 0 ? Infinity : traversal.limit;
  if (remaining === 0) return;
  const { filter } = traversal;
  const firstBatch = filter === null && Number.isFinite(remaining) ? skip + remaining : 1000;
  const batches = documents.traverse(collection, traversal.source, firstBatch);
  const pacer = new Pacer();
  const weight = filter?.weight ?? 1;
  let work = 0;
  try {
    for await (const batch of batches) {
      // The client has gone: stop reading, even while nothing matches (nothing is written then).
      if (options.stopped?.()) return;
      let selected: { seq: number; body: string }[] = [];
      let bytes = 0;
      for (const candidate of batch) {
        if (work >= WORK_PER_LOOK) {
          work = 0;
          if (pacer.due) await pacer.turn();
        }
        work += candidate.body.length * weight + 1024;
        if (options.upToSeq !== undefined && candidate.seq > options.upToSeq) continue;
        if (options.skipSeqs?.has(candidate.seq)) continue;
        if (
          filter !== null &&
          !(filters.inline(filter, candidate.body) ?? (await filters.inWorker(filter, candidate.body)))
        )
          continue;
        if (skip > 0) {
          skip--;
          continue;
        }
        selected.push(candidate);
        bytes += candidate.body.length;
        remaining--;
        if (remaining === 0) break;
        if (bytes >= ACT_BYTES) {
          if (!(await act(selected)) || options.stopped?.()) return;
          selected = [];
          bytes = 0;
        }
      }
      if (selected.length > 0 && !(await act(selected))) return;
      if (remaining === 0) return;
      await pacer.pace();
    }
  } finally {
    await batches.return(undefined);
  }
}
