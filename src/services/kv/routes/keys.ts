import { Type } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { isJsonObject, stringifyJson, type JsonValue } from '../../../core/json.ts';
import { entryJson, unixSeconds } from '../commands.ts';
import { KvErrors } from '../errors.ts';
import { colParams, entry, errorBody, keyParams, presence, writeResult } from '../schemas.ts';
import { json, keyOf, projectOf, type KvNode } from './common.ts';
import { forward } from './forward.ts';
import { SIGNED_IN, type RouteDocs } from '../../../core/openapi.ts';

/** Most items one list page returns (README: `limit` 1–1000). */
export const MAX_LIST_LIMIT = 1_000;
const DEFAULT_LIST_LIMIT = 100;

const listSchema = {
  tags: ['keys'],
  operationId: 'listKeys',
  security: SIGNED_IN,
  summary: 'List keys in code-point order, a page at a time',
  description: `${presence} \`next\` is the last key returned when more follow (pass it as \`after\`), else null.`,
  params: colParams,
  querystring: Type.Object({
    prefix: Type.Optional(Type.String()),
    limit: Type.Optional(Type.String()),
    after: Type.Optional(Type.String()),
  }),
  response: {
    200: Type.Object({ items: Type.Array(entry), next: Type.Union([Type.String(), Type.Null()]) }),
    400: errorBody,
    403: errorBody,
    404: errorBody,
  },
};

const getSchema = {
  tags: ['keys'],
  operationId: 'getKey',
  security: SIGNED_IN,
  summary: 'Get a key (everything after /keys/, slashes included)',
  description: presence,
  params: keyParams,
  response: { 200: entry, 400: errorBody, 403: errorBody, 404: errorBody },
};

const setSchema = {
  tags: ['keys'],
  operationId: 'setKey',
  security: SIGNED_IN,
  summary: 'Set a key to {"value": <any JSON>}',
  description: `${presence} On a replica the write goes to the parent first (502 parent_unavailable when it cannot).`,
  params: keyParams,
  // The body is read as exact JSON (integers past 2^53 kept), whatever its Content-Type: no route schema.
  openapi: {
    rawBody: {
      mediaTypes: ['application/json'],
      description: 'The new value',
      schema: { type: 'object', required: ['value'], properties: { value: { description: 'any JSON' } } },
    },
  } satisfies RouteDocs,
  response: { 200: writeResult, 400: errorBody, 403: errorBody, 404: errorBody, 413: errorBody, 502: errorBody },
};

const deleteSchema = {
  tags: ['keys'],
  operationId: 'deleteKey',
  security: SIGNED_IN,
  summary: 'Delete a key (its version is remembered)',
  description: presence,
  params: keyParams,
  response: { 200: writeResult, 400: errorBody, 403: errorBody, 404: errorBody, 502: errorBody },
};

/** A set's value as exact JSON text. */
function valueOf(body: JsonValue | undefined): string {
  if (!isJsonObject(body) || !Object.prototype.hasOwnProperty.call(body, 'value')) throw KvErrors.valueRequired();
  return stringifyJson(body.value!);
}

/** List, get, set and delete keys; the key is everything after `/keys/`, slashes included. */
export function registerKeyRoutes(app: ServiceApp, node: KvNode): void {
  const { repository, feed, counters } = node;

  app.get('/v1/collections/:col/keys', { schema: listSchema }, async (request, reply) => {
    const project = projectOf(request);
    const { prefix = '', after } = request.query;
    const limitText = request.query.limit;
    const limit = limitText === undefined ? DEFAULT_LIST_LIMIT : /^[1-9]\d*$/.test(limitText) ? Number(limitText) : NaN;
    if (!Number.isSafeInteger(limit) || limit > MAX_LIST_LIMIT) throw KvErrors.invalidLimit(MAX_LIST_LIMIT);
    // One row more than the page tells whether another page follows.
    const rows = await repository.list(project, request.params.col, {
      prefix,
      ...(after === undefined ? {} : { after }),
      limit: limit + 1,
    });
    if (rows === null) throw KvErrors.collectionNotFound();
    const page = rows.slice(0, limit);
    const next = rows.length > limit ? page[page.length - 1]!.key : null;
    counters.reads++;
    return json(reply, `{"items":[${page.map(entryJson).join(',')}],"next":${JSON.stringify(next)}}`);
  });

  app.get('/v1/collections/:col/keys/*', { schema: getSchema }, async (request, reply) => {
    const project = projectOf(request);
    const key = keyOf(request);
    const collection = request.params.col;
    const found = await repository.find(project, collection, key);
    if (found === null)
      throw (await repository.hasCollection(project, collection))
        ? KvErrors.keyNotFound()
        : KvErrors.collectionNotFound();
    counters.reads++;
    return json(reply, found.answer());
  });

  app.post('/v1/collections/:col/keys/*', { schema: setSchema }, async (request, reply) => {
    const project = projectOf(request);
    const key = keyOf(request);
    const value = valueOf(request.body as JsonValue | undefined);
    const collection = request.params.col;
    if (node.lease) {
      if (!(await repository.hasCollection(project, collection))) throw KvErrors.missingCollection();
      return forward(node, request, reply, project, (answer) => ({
        type: 'SET',
        project,
        collection,
        key,
        value,
        seq: answer.seq,
        version: answer.version,
        timestamp: unixSeconds(),
      }));
    }
    const outcome = await repository.set(project, collection, key, value, unixSeconds());
    if (outcome === 'missing_collection') throw KvErrors.missingCollection();
    feed.logged();
    counters.writes++;
    return json(reply, `{"ok":true,"seq":${outcome.seq},"version":${outcome.version}}`);
  });

  app.delete('/v1/collections/:col/keys/*', { schema: deleteSchema }, async (request, reply) => {
    const project = projectOf(request);
    const key = keyOf(request);
    const collection = request.params.col;
    if (node.lease) {
      const found = await repository.get(project, collection, key);
      if (found !== null && 'collection' in found) throw KvErrors.missingCollection();
      if (found === null) throw KvErrors.keyNotFound();
      return forward(node, request, reply, project, (answer) => ({
        type: 'DELETE',
        project,
        collection,
        key,
        seq: answer.seq,
        version: answer.version,
        timestamp: unixSeconds(),
      }));
    }
    const outcome = await repository.delete(project, collection, key, unixSeconds());
    if (outcome === 'missing_collection') throw KvErrors.missingCollection();
    if (outcome === 'not_found') throw KvErrors.keyNotFound();
    feed.logged();
    counters.writes++;
    return json(reply, `{"ok":true,"seq":${outcome.seq},"version":${outcome.version}}`);
  });
}
