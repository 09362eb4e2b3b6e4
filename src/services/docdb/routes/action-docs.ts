import { Type, type TSchema } from 'typebox';
import type { CollectionAction, DatabaseAction } from '../actions.ts';
import { createdKey, createKeyBody, deleteKeyBody, ownerBody, ownersList } from '../schemas.ts';
import { named } from '../../../core/openapi.ts';

// The colon actions are served by one POST route per resource (routes/databases/actions.ts,
// routes/collections/actions.ts), hidden from the generated document; routes/openapi.ts gives each
// action its own path from the tables here.

/** For the OpenAPI document: each database action's summary, body schema and success response. */
export const DATABASE_ACTION_DOCS: Record<
  DatabaseAction,
  { operationId: string; summary: string; body: TSchema; status: number; response: TSchema | null }
> = {
  createApiKey: {
    operationId: 'createDatabaseApiKey',
    summary: 'Create an API key for the database; the secret is returned only here',
    body: createKeyBody,
    status: 201,
    response: createdKey,
  },
  deleteApiKey: {
    operationId: 'deleteDatabaseApiKey',
    summary: 'Delete an API key of the database; it stops working at once',
    body: deleteKeyBody,
    status: 204,
    response: null,
  },
  addOwner: {
    operationId: 'addDatabaseOwner',
    summary: 'Add an owner (an existing owner is no change); returns the owners',
    body: ownerBody,
    status: 200,
    response: ownersList,
  },
  deleteOwner: {
    operationId: 'deleteDatabaseOwner',
    summary: 'Remove an owner other than yourself; returns the owners',
    body: ownerBody,
    status: 200,
    response: ownersList,
  },
};

/** An index's fields: `flag` is the schema of `sparse` and `unique` (always listed; optional when creating). */
const indexFields = (flag: () => TSchema) => ({
  name: Type.String(),
  type: Type.Union([Type.Literal('map'), Type.Literal('btree')]),
  field: Type.Optional(Type.String()),
  fields: Type.Optional(Type.Array(Type.String())),
  sparse: flag(),
  unique: flag(),
});
const indexRecord = named(
  'Index',
  Type.Object(
    indexFields(() => Type.Boolean()),
    { additionalProperties: false },
  ),
);
const traversal = {
  index: Type.Optional(
    Type.Union([Type.String(), Type.Null()], { description: 'index to traverse; null = full scan' }),
  ),
  filter: Type.Optional(
    Type.Object(
      {},
      { additionalProperties: true, description: 'condition in the filter language; {} matches every document' },
    ),
  ),
  skip: Type.Optional(Type.Integer({ default: 0 })),
  limit: Type.Optional(Type.Integer({ default: 1, description: '0 → none; negative → no limit' })),
  value: Type.Optional(Type.String({ description: 'map index: the key to look up' })),
  reverse: Type.Optional(Type.Boolean({ description: 'btree: descending order' })),
  from: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'btree: lower pivot' })),
  to: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'btree: upper pivot' })),
};
const ndjson = Type.String({ description: 'NDJSON: one document per line' });
const documentStream = Type.String({ description: 'JSON documents: NDJSON, concatenated or pretty-printed' });
const indexNameBody = Type.Object({ name: Type.String() }, { additionalProperties: true });

/** For the OpenAPI document: each collection action's summary, body and success response. */
export const COLLECTION_ACTION_DOCS: Record<
  CollectionAction,
  {
    operationId: string;
    summary: string;
    body: TSchema | null;
    status: number;
    response: TSchema | null;
    /** Media types of the body and the success response when not JSON (docdb.md: every answer is application/json but insertStream's). */
    bodyMedia?: readonly string[];
    responseMedia?: string;
  }
> = {
  dropCollection: {
    operationId: 'dropCollection',
    summary: 'Drop the collection with its documents and indexes',
    body: null,
    status: 204,
    response: null,
  },
  setDefaults: {
    operationId: 'setCollectionDefaults',
    summary: 'Merge into the collection defaults (null deletes a key)',
    body: Type.Object({}, { additionalProperties: true }),
    status: 200,
    response: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
  },
  size: {
    operationId: 'getCollectionSize',
    summary: 'Estimated sizes in bytes: memory, disk and index.<name>',
    body: null,
    status: 200,
    response: Type.Record(Type.String(), Type.Number()),
  },
  insert: {
    operationId: 'insertDocuments',
    bodyMedia: ['application/x-ndjson', 'application/json'],
    summary: 'Insert a stream of documents; NDJSON of each stored document once committed',
    body: documentStream,
    status: 201,
    response: ndjson,
  },
  insertFullduplex: {
    operationId: 'insertDocumentsFullDuplex',
    bodyMedia: ['application/x-ndjson', 'application/json'],
    summary: 'Insert a stream of documents (no default id); NDJSON answers as they commit',
    body: documentStream,
    status: 200,
    response: ndjson,
  },
  insertStream: {
    operationId: 'insertDocumentStream',
    bodyMedia: ['application/x-ndjson', 'application/json'],
    responseMedia: 'text/plain',
    summary: 'Insert a stream of documents; per document its JSON or an error string, continuing past errors',
    body: documentStream,
    status: 202,
    response: Type.String(),
  },
  find: {
    operationId: 'findDocuments',
    summary: 'Find documents (full scan or index traversal)',
    body: Type.Object(traversal, { additionalProperties: true }),
    status: 200,
    response: ndjson,
  },
  patch: {
    operationId: 'patchDocuments',
    summary: 'Merge-patch the selected documents',
    body: Type.Object(
      { ...traversal, patch: Type.Object({}, { additionalProperties: true }) },
      { additionalProperties: true },
    ),
    status: 200,
    response: ndjson,
  },
  remove: {
    operationId: 'removeDocuments',
    summary: 'Remove the selected documents',
    body: Type.Object(traversal, { additionalProperties: true }),
    status: 200,
    response: ndjson,
  },
  listIndexes: {
    operationId: 'listIndexes',
    summary: 'List indexes in creation order',
    body: null,
    status: 200,
    response: Type.Array(indexRecord),
  },
  createIndex: {
    operationId: 'createIndex',
    summary: 'Create a map or btree index over the existing documents',
    body: Type.Object(
      indexFields(() => Type.Optional(Type.Boolean())),
      { additionalProperties: true },
    ),
    status: 201,
    response: indexRecord,
  },
  getIndex: {
    operationId: 'getIndex',
    summary: 'Get an index',
    body: indexNameBody,
    status: 200,
    response: indexRecord,
  },
  dropIndex: { operationId: 'dropIndex', summary: 'Drop an index', body: indexNameBody, status: 204, response: null },
};
