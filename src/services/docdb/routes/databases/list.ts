import { Type } from 'typebox';
import type { ServiceApp } from '../../../../core/app.ts';
import { databaseSummary, errorBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { identity } from './common.ts';

export const listDatabasesSchema = {
  tags: ['databases'],
  security: identity,
  operationId: 'listDatabases',
  summary: "List the caller's databases in creation order",
  response: { 200: Type.Array(databaseSummary), 401: errorBody },
};

/** `GET /v1/databases`: identity required; `{id,name,creation_date,owners_length}` of each database the caller owns. */
export function registerListDatabases(app: ServiceApp, { databases, access }: RouteDeps): void {
  app.get('/v1/databases', { schema: listDatabasesSchema }, async (request) => {
    const owned = await databases.listOwnedBy(access.requireUser(request));
    return owned.map(({ id, name, creation_date, owners_length }) => ({ id, name, creation_date, owners_length }));
  });
}
