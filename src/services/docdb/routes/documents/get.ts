import type { ServiceApp } from '../../../../core/app.ts';
import { parseJson, stringifyJson, type JsonObject, type JsonValue } from '../../../../core/json.ts';
import { Pacer } from '../../../../core/pacer.ts';
import { DocdbErrors } from '../../errors.ts';
import { encodeKey } from '../../query/order.ts';
import { documentParams } from '../../schemas.ts';
import { sendJson } from '../collections/common.ts';
import { scopedSecurity } from '../databases/common.ts';
import type { RouteDeps } from '../deps.ts';

export const getDocumentSchema = {
  operationId: 'getDocument',
  security: scopedSecurity,
  tags: ['documents'],
  summary: 'Get a document by id',
  params: documentParams,
};

/** A document id as text for the full-scan lookup: strings trimmed, numbers in shortest JSON form. */
function idText(value: JsonValue | undefined): string | null {
  if (typeof value === 'string') return value.trim();
  if (typeof value === 'number' || typeof value === 'bigint') return stringifyJson(value);
  return null;
}

/**
 * `GET /v1/databases/:databaseId/collections/:collection/documents/:documentId`: first each map
 * index on `id`, in creation order, then a full scan in insertion order (README: Get by id).
 */
export function registerGetDocument(app: ServiceApp, { documents, access }: RouteDeps): void {
  app.get(
    '/v1/databases/:databaseId/collections/:collection/documents/:documentId',
    { schema: getDocumentSchema },
    async (request, reply) => {
      const database = await access.authorize(request, request.params.databaseId);
      const id = request.params.documentId.trim();
      if (id === '') throw DocdbErrors.documentIdRequired();
      const collection = await documents.getCollection(database.id, request.params.collection);
      if (!collection) throw DocdbErrors.collectionNotFound();
      for (const index of collection.indexes) {
        if (index.type !== 'map' || index.keyFields[0] !== 'id') continue;
        for await (const batch of documents.traverse(
          collection,
          { kind: 'map', index, key: encodeKey([id], [false]) },
          1,
        )) {
          const hit = batch[0];
          if (hit)
            return sendJson(reply, { id, document: parseJson(hit.body), source: { type: 'index', name: index.name } });
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
      throw DocdbErrors.documentNotFound(id);
    },
  );
}
