import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { stringifyJson, type JsonValue } from '../../../../core/json.ts';
import { rawSegments } from '../../actions.ts';
import { DocdbErrors } from '../../errors.ts';
import type { CollectionInfo, DocumentStore } from '../../repository/index.ts';
import type { DocumentFilters } from '../../filtering.ts';

const COLLECTION_NAME_MAX = 255;
// eslint-disable-next-line no-control-regex
const FORBIDDEN_NAME = /[/\u0000-\u001f\u007f]/;

/** A name a collection may be created under (README: Collections). */
export function checkCollectionName(name: string): void {
  if (name === '') throw DocdbErrors.fieldEmpty('name');
  if (name.length > COLLECTION_NAME_MAX) throw DocdbErrors.collectionNameTooLong(COLLECTION_NAME_MAX);
  if (FORBIDDEN_NAME.test(name)) throw DocdbErrors.collectionNameCharacters();
  // URL clients resolve `.` and `..` (even as `%2E%2E`) as dot-segments: such a collection could
  // never be addressed again.
  if (name === '.' || name === '..') throw DocdbErrors.collectionNameDots();
}

/**
 * Sends a single JSON value with the exact serializer: defaults and documents may hold integers
 * above 2^53 (bigint), which the default serializer refuses (README: Responses).
 */
export function sendJson(reply: FastifyReply, value: unknown, status = 200): FastifyReply {
  return reply
    .code(status)
    .type('application/json')
    .send(stringifyJson(value as JsonValue));
}

/** The collection segment of `/v1/databases/{db}/collections/{segment}…`, raw. */
export function collectionSegment(request: FastifyRequest): string {
  return rawSegments(request.raw.url ?? '/')[5] ?? '';
}

/** What a colon action of a collection works with: the request, its body stream and the collection's name. */
export interface ActionContext {
  request: FastifyRequest;
  reply: FastifyReply;
  stream: Readable;
  databaseId: string;
  name: string;
  documents: DocumentStore;
  filters: DocumentFilters;
}

/** The action's collection, or 404. */
export async function existing(context: ActionContext): Promise<CollectionInfo> {
  const collection = await context.documents.getCollection(context.databaseId, context.name);
  if (!collection) throw DocdbErrors.collectionNotFound();
  return collection;
}
