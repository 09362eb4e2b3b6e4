import type { ServiceApp } from '../../../../core/app.ts';
import { databaseParams } from '../../schemas.ts';
import { scopedSecurity } from '../databases/common.ts';
import type { RouteDeps } from '../deps.ts';
import { sendJson } from './common.ts';

export const listCollectionsSchema = {
  tags: ['collections'],
  operationId: 'listCollections',
  security: scopedSecurity,
  summary: 'List collections in creation order',
  params: databaseParams,
};

/** `GET /v1/databases/:databaseId/collections`: the collection records in creation order. */
export function registerListCollections(app: ServiceApp, { documents, access }: RouteDeps): void {
  app.get('/v1/databases/:databaseId/collections', { schema: listCollectionsSchema }, async (request, reply) => {
    const database = await access.authorize(request, request.params.databaseId);
    return sendJson(reply, await documents.listCollections(database.id));
  });
}
