import type { ServiceApp } from '../../../../core/app.ts';
import { databaseRecord, errorBody, nameBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { bodyRequired, identity, noNul } from './common.ts';

export const createDatabaseSchema = {
  tags: ['databases'],
  security: identity,
  operationId: 'createDatabase',
  summary: 'Create a database owned by the caller',
  body: nameBody,
  response: { 201: databaseRecord, 400: errorBody, 401: errorBody },
};

/** `POST /v1/databases`: identity required; 201 with the new database, the caller its sole owner. */
export function registerCreateDatabase(app: ServiceApp, { databases, access }: RouteDeps): void {
  app.post('/v1/databases', { schema: createDatabaseSchema, preValidation: bodyRequired }, async (request, reply) => {
    const name = noNul('name', request.body.name);
    const owner = access.requireUser(request);
    return reply.code(201).send(await databases.create(name, owner));
  });
}
