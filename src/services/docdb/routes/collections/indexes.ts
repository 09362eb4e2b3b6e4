import type { FastifyReply } from 'fastify';
import { stringifyJson, type JsonObject, type JsonValue } from '../../../../core/json.ts';
import { fields, requireObject } from '../../body.ts';
import { DocdbErrors } from '../../errors.ts';
import { DEFAULT_DEFAULTS, indexRecord, type IndexRecord } from '../../repository/index.ts';
import { checkCollectionName, existing, type ActionContext } from './common.ts';

// The colon actions on a collection's indexes (README: Indexes).

/** `:listIndexes`: the index records in creation order. */
export async function listIndexes(context: ActionContext): Promise<IndexRecord[]> {
  return (await existing(context)).indexes.map(indexRecord);
}

/** `:getIndex` with `{"name"}`: the index record, or 404. */
export async function getIndex(context: ActionContext, body: JsonValue | undefined): Promise<IndexRecord> {
  const indexName = fields.string(requireObject(body), 'name', { required: true })!;
  const collection = await existing(context);
  const index = collection.indexes.find((candidate) => candidate.name === indexName);
  if (!index) throw DocdbErrors.indexNotFound(indexName, context.name);
  return indexRecord(index);
}

/** `:dropIndex` with `{"name"}`: 204, or 404 (the collection is not created). */
export async function dropIndex(context: ActionContext, body: JsonValue | undefined): Promise<FastifyReply> {
  const indexName = fields.string(requireObject(body), 'name', { required: true })!;
  const collection = await existing(context);
  if (!(await context.documents.dropIndex(collection, indexName)))
    throw DocdbErrors.indexNotFound(indexName, context.name);
  return context.reply.code(204).send();
}

/**
 * `:createIndex`: 201 with the index record, built over the existing documents. The definition is
 * checked first; a missing collection is then created with the default defaults.
 */
export async function createIndex(context: ActionContext, body: JsonValue | undefined): Promise<FastifyReply> {
  const { reply, documents, databaseId, name } = context;
  const definition = indexDefinition(requireObject(body));
  checkCollectionName(name);
  const collection = await documents.ensureCollection(databaseId, name, DEFAULT_DEFAULTS);
  const index = await documents.createIndex(collection, definition);
  return reply.code(201).send(indexRecord(index));
}

function indexDefinition(body: JsonObject): {
  name: string;
  type: 'map' | 'btree';
  fields: string[];
  sparse: boolean;
  unique: boolean;
} {
  const name = fields.string(body, 'name', { required: true, nonEmpty: true })!;
  const type = body.type;
  if (type !== 'map' && type !== 'btree')
    throw DocdbErrors.indexTypeInvalid(typeof type === 'string' ? type : stringifyJson(type ?? null));
  const sparse = fields.boolean(body, 'sparse', false);
  const unique = fields.boolean(body, 'unique', type === 'map');
  const field = fields.string(body, 'field');
  if (type === 'map') {
    if (field === undefined || field === '') throw DocdbErrors.mapIndexNeedsField();
    return { name, type, fields: [field], sparse, unique };
  }
  let list: string[];
  if (body.fields !== undefined && body.fields !== null) {
    if (!Array.isArray(body.fields) || !body.fields.every((f) => typeof f === 'string'))
      throw DocdbErrors.fieldType('fields', 'an array of strings');
    list = body.fields as string[];
  } else if (field !== undefined) {
    list = [field];
  } else {
    throw DocdbErrors.btreeIndexNeedsFields();
  }
  if (list.length === 0) throw DocdbErrors.fieldEmpty('fields');
  if (list.some((f) => f === '' || f === '-')) throw DocdbErrors.indexFieldNameEmpty();
  return { name, type, fields: list, sparse, unique };
}
