import type { ServiceApp } from '../../../../core/app.ts';
import { databaseParams, databaseRecord, errorBody } from '../../schemas.ts';
import { scopedSecurity } from './common.ts';
import type { RouteDeps } from '../deps.ts';
import { refuseAction, scopedAccess, targetOf } from './common.ts';

export const getDatabaseSchema = {
  tags: ['databases'],
  operationId: 'getDatabase',
  security: scopedSecurity,
  summary: 'Get a database',
  description: scopedAccess,
  params: databaseParams,
  response: { 200: databaseRecord, 401: errorBody, 403: errorBody, 404: errorBody, 405: errorBody },
};

/** `GET /v1/databases/:databaseId`: the full record. */
export function registerGetDatabase(app: ServiceApp, { access }: RouteDeps): void {
  app.get('/v1/databases/:databaseId', { schema: getDatabaseSchema, onRequest: refuseAction }, async (request) =>
    access.authorize(request, targetOf(request).name),
  );
}
