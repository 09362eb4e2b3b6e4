import { randomUUID } from 'node:crypto';
import { hash } from '@node-rs/bcrypt';
import type { ServiceApp } from '../../../../core/app.ts';
import { LogsErrors } from '../../errors.ts';
import { createdKey, idParams, nameBody, scoped, scopedErrors } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

/** bcrypt cost for logger key secrets (README: loggers, keys and owners). */
const SECRET_HASH_COST = 10;

export const createKeySchema = {
  tags: ['loggers'],
  operationId: 'createLoggerApiKey',
  security: SIGNED_IN,
  summary: 'Create a logger API key; the secret is returned only here',
  description: scoped,
  params: idParams,
  body: nameBody,
  response: { 201: createdKey, ...scopedErrors },
};

/** `POST /v1/loggers/:id/apiKeys`: a new key pair (UUID v4 each); only the secret's bcrypt hash is stored. */
export function registerCreateKey(app: ServiceApp, { loggers, access }: RouteDeps): void {
  app.post('/v1/loggers/:id/apiKeys', { schema: createKeySchema }, async (request, reply) => {
    const { loggerId } = await access.authorize(request, request.params.id);
    const key = randomUUID();
    const secret = randomUUID();
    const view = await loggers.createKey(loggerId, request.body.name, key, await hash(secret, SECRET_HASH_COST));
    if (!view) throw LogsErrors.loggerNotFound();
    return reply.code(201).send({ id: view.id, name: view.name, key, secret, created_at: view.created_at });
  });
}
