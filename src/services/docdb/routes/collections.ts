import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { HttpError, badRequest, conflict, notFound, validationError } from '../../../core/errors.ts';
import type { DocdbAccess } from '../access.ts';
import { COLLECTION_ACTIONS, rawSegments, splitAction, type CollectionAction } from '../actions.ts';
import { BODY_LIMIT, discardRest, fields, invalidJson, readChunks, readJsonBody, requireObject } from '../body.ts';
import { DEFAULT_DEFAULTS, indexRecord, type CollectionInfo, type DocumentStore, type Source, type WriteOutcome } from '../documents.ts';
import { JsonStreamError, jsonValues } from '../json-values.ts';
import { LineResponse } from '../lines.ts';
import { Pacer } from '../../../core/pacer.ts';
import { Filter, type DocumentFilters } from '../filtering.ts';
import { InvalidFilterError } from '../query/filter.ts';
import { MAX_NESTING, isJsonObject, nestedDeeperThan, parseJson, stringifyJson, type JsonObject, type JsonValue } from '../../../core/json.ts';
import { jsonEquals, mergePatch } from '../query/merge-patch.ts';
import { encodeKey } from '../query/order.ts';

export interface CollectionRouteDeps {
  documents: DocumentStore;
  access: DocdbAccess;
  filters: DocumentFilters;
}

const COLLECTION_NAME_MAX = 255;
// eslint-disable-next-line no-control-regex
const FORBIDDEN_NAME = /[/\u0000-\u001f\u007f]/;

function checkCollectionName(name: string): void {
  if (name === '') throw validationError("'name' must not be empty");
  if (name.length > COLLECTION_NAME_MAX) throw validationError(`collection name longer than ${COLLECTION_NAME_MAX} characters`);
  if (FORBIDDEN_NAME.test(name)) throw validationError('collection name must not contain / or control characters');
  // URL clients resolve `.` and `..` (even as `%2E%2E`) as dot-segments: such a collection could
  // never be addressed again.
  if (name === '.' || name === '..') throw validationError("collection name must not be '.' or '..'");
}

/**
 * Sends a single JSON value with the exact serializer: defaults and documents may hold integers
 * above 2^53 (bigint), which the default serializer refuses (docdb.md §1.3).
 */
function sendJson(reply: FastifyReply, value: unknown, status = 200): FastifyReply {
  return reply.code(status).type('application/json').send(stringifyJson(value as JsonValue));
}

const collectionNotFound = () => notFound('collection not found');
const indexNotFound = (index: string, collection: string) => notFound(`index '${index}' not found in collection '${collection}'`);

/** The collection segment of `/v1/databases/{db}/collections/{segment}…`, raw. */
function collectionSegment(request: FastifyRequest): string {
  return rawSegments(request.raw.url ?? '/')[5] ?? '';
}

const params = Type.Object({ databaseId: Type.String(), collection: Type.String() });
const dbParams = Type.Object({ databaseId: Type.String() });

// ---------------------------------------------------------------------------------------------
// Traversal (find, patch, remove): docdb.md §9.1

interface Traversal {
  source: Source;
  filter: Filter | null;
  skip: number;
  /** Negative: no limit. */
  limit: number;
}

/** The body fields every source uses; checked before the collection is looked up (§9.1 step 1). */
function traversalFields(body: JsonObject): { indexName: string | null; skip: number; limit: number } {
  const indexName = body.index === undefined || body.index === null ? null : body.index;
  if (indexName !== null && typeof indexName !== 'string') throw validationError("'index' must be a string or null");
  return { indexName, skip: fields.integer(body, 'skip', 0), limit: fields.integer(body, 'limit', 1) };
}

function parseTraversal(body: JsonObject, collection: CollectionInfo): Traversal {
  const { indexName, skip, limit } = traversalFields(body);
  let source: Source = { kind: 'scan' };
  if (indexName !== null) {
    const index = collection.indexes.find((candidate) => candidate.name === indexName);
    if (!index) throw indexNotFound(indexName, collection.name);
    if (index.type === 'map') {
      const value = body.value === undefined ? '' : body.value;
      if (typeof value !== 'string') throw validationError("'value' must be a string");
      source = { kind: 'map', index, key: encodeKey([value], [false]) };
    } else {
      const reverse = fields.boolean(body, 'reverse', false);
      const pivot = (name: 'from' | 'to') => {
        const value = body[name];
        if (value === undefined) return null;
        if (!isJsonObject(value)) throw validationError(`'${name}' must be an object`);
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
      if (error instanceof InvalidFilterError) throw badRequest('invalid_filter', error.message);
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
async function traverse(
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
        if (filter !== null && !(filters.inline(filter, candidate.body) ?? (await filters.inWorker(filter, candidate.body)))) continue;
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

// ---------------------------------------------------------------------------------------------

export function registerCollectionRoutes(app: ServiceApp, deps: CollectionRouteDeps): void {
  const { documents, access, filters } = deps;
  const tags = ['collections'];

  app.get(
    '/v1/databases/:databaseId/collections',
    { schema: { tags, summary: 'List collections in creation order', params: dbParams } },
    async (request, reply) => {
      const database = await access.authorize(request, request.params.databaseId);
      return sendJson(reply, await documents.listCollections(database.id));
    },
  );

  app.post(
    '/v1/databases/:databaseId/collections',
    {
      schema: {
        tags,
        summary: 'Create a collection',
        params: dbParams,
        body: Type.Object({ name: Type.String(), defaults: Type.Optional(Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()])) }, { additionalProperties: true }),
      },
    },
    async (request, reply) => {
      const database = await access.authorize(request, request.params.databaseId);
      const { name } = request.body;
      checkCollectionName(name);
      const defaults = (request.body.defaults ?? DEFAULT_DEFAULTS) as JsonObject;
      if (nestedDeeperThan(defaults, MAX_NESTING)) throw validationError(`defaults nested more than ${MAX_NESTING} levels deep`);
      if (!(await documents.createCollection(database.id, name, defaults))) throw conflict('collection already exists');
      return sendJson(reply, await documents.collectionRecord(database.id, name), 201);
    },
  );

  app.get(
    '/v1/databases/:databaseId/collections/:collection',
    { schema: { tags, summary: 'Get a collection', params } },
    async (request, reply) => {
      const target = splitAction(collectionSegment(request), COLLECTION_ACTIONS);
      if (target?.action) throw new HttpError(405, 'method_not_allowed', `use POST for :${target.action}`, { allow: 'POST' });
      const database = await access.authorize(request, request.params.databaseId);
      const record = target ? await documents.collectionRecord(database.id, target.name) : null;
      if (!record) throw collectionNotFound();
      return sendJson(reply, record);
    },
  );

  app.get(
    '/v1/databases/:databaseId/collections/:collection/documents/:documentId',
    { schema: { tags: ['documents'], summary: 'Get a document by id', params: Type.Object({ databaseId: Type.String(), collection: Type.String(), documentId: Type.String() }) } },
    async (request, reply) => {
      const database = await access.authorize(request, request.params.databaseId);
      const id = request.params.documentId.trim();
      if (id === '') throw validationError('document id is required');
      const collection = await documents.getCollection(database.id, request.params.collection);
      if (!collection) throw collectionNotFound();
      for (const index of collection.indexes) {
        if (index.type !== 'map' || index.keyFields[0] !== 'id') continue;
        for await (const batch of documents.traverse(collection, { kind: 'map', index, key: encodeKey([id], [false]) }, 1)) {
          const hit = batch[0];
          if (hit) return sendJson(reply, { id, document: parseJson(hit.body), source: { type: 'index', name: index.name } });
        }
      }
      // Stored bodies are canonical JSON, so a document whose id is `id` holds its escaped text:
      // only those are parsed. The event loop gets a turn every few milliseconds.
      const needle = JSON.stringify(id).slice(1, -1);
      const pacer = new Pacer();
      for await (const batch of documents.traverse(collection, { kind: 'scan' })) {
        for (const candidate of batch) {
          if (pacer.due) await pacer.turn();
          if (!candidate.body.includes(needle)) continue;
          const document = parseJson(candidate.body) as JsonObject;
          if (idText(document.id) === id) return sendJson(reply, { id, document, source: { type: 'fullscan' } });
        }
      }
      throw notFound(`document '${id}' not found`);
    },
  );

  // Colon actions: one POST route, the body read here (insert endpoints stream it), so this
  // route lives in its own context whose only parser hands the raw stream through.
  void app.register(async (actions: ServiceApp) => {
    actions.removeAllContentTypeParsers();
    actions.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    // Action answers (defaults, index records, sizes) may hold integers above 2^53.
    actions.setReplySerializer((payload) => stringifyJson(payload as JsonValue));
    actions.post(
      '/v1/databases/:databaseId/collections/:collection',
      { schema: { tags, summary: 'Collection actions ({collection}:{action}); see the per-action paths', params } },
      async (request, reply) => {
        const stream = (request.body as Readable | undefined) ?? request.raw;
        const target = splitAction(collectionSegment(request), COLLECTION_ACTIONS);
        if (!target || !target.action) {
          stream.resume();
          throw new HttpError(405, 'method_not_allowed', 'collections accept GET; actions are POST {collection}:{action}', { allow: 'GET' });
        }
        const database = await access.authorize(request, request.params.databaseId);
        return runAction(target.action, { request, reply, stream, databaseId: database.id, name: target.name, documents, filters });
      },
    );
  });
}

interface ActionContext {
  request: FastifyRequest;
  reply: FastifyReply;
  stream: Readable;
  databaseId: string;
  name: string;
  documents: DocumentStore;
  filters: DocumentFilters;
}

/** A document id as text for the full-scan lookup: strings trimmed, numbers in shortest JSON form. */
function idText(value: JsonValue | undefined): string | null {
  if (typeof value === 'string') return value.trim();
  if (typeof value === 'number' || typeof value === 'bigint') return stringifyJson(value);
  return null;
}

async function existing(context: ActionContext): Promise<CollectionInfo> {
  const collection = await context.documents.getCollection(context.databaseId, context.name);
  if (!collection) throw collectionNotFound();
  return collection;
}

async function runAction(action: CollectionAction, context: ActionContext): Promise<unknown> {
  const { reply, documents, databaseId, name } = context;
  switch (action) {
    case 'insert':
      return insertAction(context, 'insert');
    case 'insertFullduplex':
      return insertAction(context, 'insertFullduplex');
    case 'insertStream':
      return insertAction(context, 'insertStream');
    case 'find':
    case 'patch':
    case 'remove':
      return traversalAction(action, context);
    default:
      break;
  }
  const body = await readJsonBody(context.stream);
  switch (action) {
    case 'dropCollection': {
      if (!(await documents.dropCollection(databaseId, name))) throw collectionNotFound();
      return reply.code(204).send();
    }
    case 'setDefaults': {
      checkCollectionName(name);
      const patch = requireObject(body);
      // Defaults become members of documents, which may nest MAX_NESTING levels.
      if (nestedDeeperThan(patch, MAX_NESTING)) throw validationError(`defaults nested more than ${MAX_NESTING} levels deep`);
      return reply.send(await documents.setDefaults(databaseId, name, patch));
    }
    case 'size':
      return documents.size(await existing(context));
    case 'listIndexes':
      return (await existing(context)).indexes.map(indexRecord);
    case 'getIndex': {
      const indexName = fields.string(requireObject(body), 'name', { required: true })!;
      const collection = await existing(context);
      const index = collection.indexes.find((candidate) => candidate.name === indexName);
      if (!index) throw indexNotFound(indexName, name);
      return indexRecord(index);
    }
    case 'dropIndex': {
      const indexName = fields.string(requireObject(body), 'name', { required: true })!;
      const collection = await existing(context);
      if (!(await documents.dropIndex(collection, indexName))) throw indexNotFound(indexName, name);
      return reply.code(204).send();
    }
    case 'createIndex': {
      const definition = indexDefinition(requireObject(body));
      checkCollectionName(name);
      const collection = await documents.ensureCollection(databaseId, name, DEFAULT_DEFAULTS);
      const index = await documents.createIndex(collection, definition);
      return reply.code(201).send(indexRecord(index));
    }
  }
}

function indexDefinition(body: JsonObject): { name: string; type: 'map' | 'btree'; fields: string[]; sparse: boolean; unique: boolean } {
  const name = fields.string(body, 'name', { required: true, nonEmpty: true })!;
  const type = body.type;
  if (type !== 'map' && type !== 'btree') throw validationError(`unexpected type '${typeof type === 'string' ? type : stringifyJson(type ?? null)}' instead of [map|btree]`);
  const sparse = fields.boolean(body, 'sparse', false);
  const unique = fields.boolean(body, 'unique', type === 'map');
  const field = fields.string(body, 'field');
  if (type === 'map') {
    if (field === undefined || field === '') throw validationError("map indexes need a non-empty 'field'");
    return { name, type, fields: [field], sparse, unique };
  }
  let list: string[];
  if (body.fields !== undefined && body.fields !== null) {
    if (!Array.isArray(body.fields) || !body.fields.every((f) => typeof f === 'string')) throw validationError("'fields' must be an array of strings");
    list = body.fields as string[];
  } else if (field !== undefined) {
    list = [field];
  } else {
    throw validationError("btree indexes need 'fields' (or 'field')");
  }
  if (list.length === 0) throw validationError("'fields' must not be empty");
  if (list.some((f) => f === '' || f === '-')) throw validationError('index field names must not be empty');
  return { name, type, fields: list, sparse, unique };
}

// ---------------------------------------------------------------------------------------------
// find, patch, remove

async function traversalAction(action: 'find' | 'patch' | 'remove', context: ActionContext): Promise<void> {
  const { reply, documents, filters } = context;
  const body = requireObject(await readJsonBody(context.stream));
  // Body types first, then the collection and index (404), then the filter (§9.1 step 1).
  traversalFields(body);
  let patch: JsonObject | null = null;
  if (action === 'patch') {
    if (body.patch === undefined) throw validationError("'patch' is required");
    if (!isJsonObject(body.patch)) throw validationError("'patch' must be an object");
    patch = body.patch;
  }
  const collection = await existing(context);
  const traversal = parseTraversal(body, collection);
  reply.hijack();
  const out = new LineResponse(reply.raw, 200);
  const stop = () => out.closed;
  // A btree traversal could meet a document again after a concurrent patch moved it ahead of the
  // traversal's position; the seqs already handled are remembered for those (full scans and map
  // lookups walk by seq, where a document never moves, so they keep no such set).
  const seen = traversal.source.kind === 'btree' ? new Set<number>() : undefined;
  try {
    if (action === 'find') {
      await traverse(
        documents,
        filters,
        collection,
        traversal,
        async (selected) => {
          for (const document of selected) {
            seen?.add(document.seq);
            out.push(document.body);
          }
          await out.flush();
          return !stop();
        },
        { stopped: stop, skipSeqs: seen },
      );
    } else {
      const upToSeq = await documents.lastSeq();
      const change = (document: JsonObject): JsonObject | null => {
        const next = mergePatch(document, patch!);
        return jsonEquals(next, document) ? null : next;
      };
      await traverse(
        documents,
        filters,
        collection,
        traversal,
        async (selected) => {
          const seqs = selected.map((document) => document.seq);
          const outcomes: WriteOutcome[] = action === 'patch' ? await documents.patch(collection, seqs, change) : await documents.remove(collection, seqs);
          for (const outcome of outcomes) {
            if (!outcome.ok) {
              out.fail(outcome.error);
              return false;
            }
            seen?.add(outcome.seq);
            out.push(outcome.text);
          }
          await out.flush();
          return !stop();
        },
        { upToSeq, skipSeqs: seen, stopped: stop },
      );
    }
    out.end();
  } catch (error) {
    out.fail(error instanceof HttpError ? error : new HttpError(500, 'internal_error', 'internal error'));
    if (!(error instanceof HttpError)) context.request.log.error({ err: error }, `docdb ${action} failed`);
  }
}

// ---------------------------------------------------------------------------------------------
// insert, insertFullduplex, insertStream (docdb.md §6.1–6.3)

const STREAM_HEADERS = {
  'content-type': 'text/plain; charset=utf-8',
  'x-content-type-options': 'nosniff',
  'access-control-allow-origin': '*',
};

async function insertAction(context: ActionContext, kind: 'insert' | 'insertFullduplex' | 'insertStream'): Promise<void> {
  const { reply, documents, databaseId, name, stream } = context;
  checkCollectionName(name);
  const collection = await documents.ensureCollection(databaseId, name, kind === 'insert' ? DEFAULT_DEFAULTS : null);
  reply.hijack();
  const streaming = kind === 'insertStream';
  const out = new LineResponse(reply.raw, streaming ? 202 : kind === 'insert' ? 201 : 200, streaming ? STREAM_HEADERS : undefined);
  if (streaming) await out.flush(true);
  let sawValue = false;
  const values = jsonValues(readChunks(stream), { maxValueBytes: BODY_LIMIT });
  try {
    for await (const texts of values) {
      sawValue = true;
      // Parse the batch; a malformed value ends it (and, outside insertStream, the request).
      const parsed: JsonValue[] = [];
      let failure: HttpError | null = null;
      for (const text of texts) {
        try {
          parsed.push(parseJson(text));
        } catch {
          failure = invalidJson();
          break;
        }
      }
      const outcomes = parsed.length > 0 ? await documents.insert(collection, parsed, !streaming) : [];
      for (const outcome of outcomes) {
        if (outcome.ok) out.push(outcome.text);
        else if (streaming) out.push(JSON.stringify(outcome.error.message));
        else {
          failure = outcome.error;
          break;
        }
      }
      if (failure) {
        if (streaming) out.push(JSON.stringify(failure.message));
        else out.fail(failure);
        if (streaming) out.end();
        discardRest(stream);
        return;
      }
      await out.flush(true);
      if (out.closed) {
        stream.destroy();
        return;
      }
    }
    if (!sawValue && !streaming) out.setStatus(kind === 'insert' ? 204 : 200);
    out.end();
  } catch (error) {
    const failure = error instanceof JsonStreamError ? new HttpError(error.code === 'payload_too_large' ? 413 : 400, error.code, error.message) : error instanceof HttpError ? error : null;
    // A client that hangs up mid-body ends the request stream with ECONNRESET: not a service error.
    const clientGone = out.closed || (error as { code?: unknown } | null)?.code === 'ECONNRESET';
    if (!failure && !clientGone) context.request.log.error({ err: error }, `docdb ${kind} failed`);
    const reported = failure ?? new HttpError(500, 'internal_error', 'internal error');
    if (streaming) {
      out.push(JSON.stringify(reported.message));
      out.end();
    } else out.fail(reported);
    discardRest(stream);
  }
}
