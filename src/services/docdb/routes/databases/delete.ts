import type { ServiceApp } from '../../../../core/app.ts';
import { DocdbErrors } from '../../errors.ts';
import { databaseParams, deletedDatabase, errorBody } from '../../schemas.ts';
import { scopedSecurity } from './common.ts';
import type { RouteDeps } from '../deps.ts';
import { refuseAction, scopedAccess, targetOf } from './common.ts';

export const deleteDatabaseSchema = {
  tags: ['databases'],
  operationId: 'deleteDatabase',
  security: scopedSecurity,
  summary: 'Delete a database with its collections, documents, indexes and keys',
  description: scopedAccess,
  params: databaseParams,
  response: { 200: deletedDatabase, 401: errorBody, 403: errorBody, 404: errorBody, 405: errorBody },
};

/** `DELETE /v1/databases/:databaseId`: `{id,name,creation_date}`; its keys stop working on every instance. */
export function registerDeleteDatabase(app: ServiceApp, { databases, access }: RouteDeps): void {
  app.delete(
    '/v1/databases/:databaseId',
    { schema: deleteDatabaseSchema, onRequest: refuseAction },
    async (request) => {
      const database = await access.authorize(request, targetOf(request).name);
      const deleted = await databases.delete(database.id);
      if (!deleted) throw DocdbErrors.databaseNotFound();
      await access
        .revokeDatabase(deleted.id)
        .catch((err: unknown) =>
          request.log.error({ err, databaseId: deleted.id }, 'could not publish docdb key revocation'),
        );
      return deleted;
    },
  );
}
