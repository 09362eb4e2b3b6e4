import type { ServiceApp } from '../../../../core/app.ts';
import { DocdbErrors } from '../../errors.ts';
import { databaseParams, databaseRecord, errorBody, nameBody } from '../../schemas.ts';
import { scopedSecurity } from './common.ts';
import type { RouteDeps } from '../deps.ts';
import { bodyRequired, noNul, refuseAction, scopedAccess, targetOf } from './common.ts';

export const renameDatabaseSchema = {
  tags: ['databases'],
  operationId: 'renameDatabase',
  security: scopedSecurity,
  summary: 'Rename a database',
  description: scopedAccess,
  params: databaseParams,
  body: nameBody,
  response: { 200: databaseRecord, 400: errorBody, 401: errorBody, 403: errorBody, 404: errorBody, 405: errorBody },
};

/** `PATCH /v1/databases/:databaseId`: the full record after the change. */
export function registerRenameDatabase(app: ServiceApp, { databases, access }: RouteDeps): void {
  app.patch(
    '/v1/databases/:databaseId',
    { schema: renameDatabaseSchema, onRequest: refuseAction, preValidation: bodyRequired },
    async (request) => {
      const name = noNul('name', request.body.name);
      const database = await access.authorize(request, targetOf(request).name);
      const renamed = await databases.rename(database.id, name);
      if (!renamed) throw DocdbErrors.databaseNotFound();
      return renamed;
    },
  );
}
