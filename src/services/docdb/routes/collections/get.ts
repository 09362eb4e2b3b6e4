import type { ServiceApp } from '../../../../core/app.ts';
import { COLLECTION_ACTIONS, splitAction } from '../../actions.ts';
import { DocdbErrors } from '../../errors.ts';
import { collectionParams } from '../../schemas.ts';
import { scopedSecurity } from '../databases/common.ts';
import type { RouteDeps } from '../deps.ts';
import { collectionSegment, sendJson } from './common.ts';

export const getCollectionSchema = {
  operationId: 'getCollection',
  security: scopedSecurity,
  tags: ['collections'],
  summary: 'Get a collection',
  params: collectionParams,
};

/** `GET /v1/databases/:databaseId/collections/:collection`: the record; an action there is 405 (use POST). */
export function registerGetCollection(app: ServiceApp, { documents, access }: RouteDeps): void {
  app.get(
    '/v1/databases/:databaseId/collections/:collection',
    { schema: getCollectionSchema },
    async (request, reply) => {
      const target = splitAction(collectionSegment(request), COLLECTION_ACTIONS);
      if (target?.action) throw DocdbErrors.actionNeedsPost(target.action);
      const database = await access.authorize(request, request.params.databaseId);
      const record = target ? await documents.collectionRecord(database.id, target.name) : null;
      if (!record) throw DocdbErrors.collectionNotFound();
      return sendJson(reply, record);
    },
  );
}
