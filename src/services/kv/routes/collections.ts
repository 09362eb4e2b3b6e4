import { Type } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { isJsonObject, type JsonValue } from '../../../core/json.ts';
import { unixSeconds } from '../commands.ts';
import { KvErrors } from '../errors.ts';
import { colParams, collectionResult, errorBody, presence } from '../schemas.ts';
import { projectOf, type KvNode } from './common.ts';
import { forward } from './forward.ts';
import { SIGNED_IN } from '../../../core/openapi.ts';

const MAX_COLLECTION_LENGTH = 128;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

const listSchema = {
  tags: ['collections'],
  operationId: 'listCollections',
  security: SIGNED_IN,
  summary: 'Collection names, in creation order',
  description: presence,
  response: { 200: Type.Object({ collections: Type.Array(Type.String()) }), 400: errorBody, 403: errorBody },
};

const createSchema = {
  tags: ['collections'],
  operationId: 'createCollection',
  security: SIGNED_IN,
  summary: 'Create a collection (an existing one is no change)',
  description: `${presence} Body {"name":"…"} or {"collection":"…"}; name wins when both are given.`,
  response: { 200: collectionResult, 400: errorBody, 403: errorBody, 502: errorBody },
};

const dropSchema = {
  tags: ['collections'],
  operationId: 'deleteCollection',
  security: SIGNED_IN,
  summary: 'Delete a collection and all its keys',
  description: presence,
  params: colParams,
  response: { 200: collectionResult, 400: errorBody, 403: errorBody, 404: errorBody, 502: errorBody },
};

/** The collection name of a create: `name`, else `collection`; 1–128 characters, no "/" or control characters. */
function collectionName(body: JsonValue | undefined): string {
  if (body === undefined) throw KvErrors.collectionNameRequired();
  if (!isJsonObject(body)) throw KvErrors.bodyNotObject();
  const raw = body.name !== undefined ? body.name : body.collection;
  if (raw === undefined || raw === null || raw === '') throw KvErrors.collectionNameRequired();
  if (typeof raw !== 'string') throw KvErrors.collectionNameNotString();
  if (raw.length > MAX_COLLECTION_LENGTH || raw.includes('/') || CONTROL.test(raw))
    throw KvErrors.invalidCollectionName(MAX_COLLECTION_LENGTH);
  return raw;
}

/** List, create and drop collections (each project has its own). */
export function registerCollectionRoutes(app: ServiceApp, node: KvNode): void {
  const { repository, feed, counters } = node;

  app.get('/v1/collections', { schema: listSchema }, async (request) => ({
    collections: await repository.collections(projectOf(request)),
  }));

  app.post('/v1/collections', { schema: createSchema }, async (request, reply) => {
    const project = projectOf(request);
    const name = collectionName(request.body as JsonValue | undefined);
    if (node.lease)
      return forward(node, request, reply, project, () => ({
        type: 'CREATE_COLLECTION',
        project,
        collection: name,
        timestamp: unixSeconds(),
      }));
    if (await repository.createCollection(project, name, unixSeconds())) feed.logged();
    counters.writes++;
    return { ok: true, collection: name };
  });

  app.delete('/v1/collections/:col', { schema: dropSchema }, async (request, reply) => {
    const project = projectOf(request);
    const name = request.params.col;
    if (!(await repository.hasCollection(project, name))) throw KvErrors.collectionNotFound();
    if (node.lease)
      return forward(node, request, reply, project, () => ({
        type: 'DROP_COLLECTION',
        project,
        collection: name,
        timestamp: unixSeconds(),
      }));
    if (!(await repository.dropCollection(project, name, unixSeconds()))) throw KvErrors.collectionNotFound();
    feed.logged();
    counters.writes++;
    return { ok: true, collection: name };
  });
}
