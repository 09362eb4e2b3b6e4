import type { ServiceApp } from '../../../../core/app.ts';
import { errorBody, loggerRecord, nameBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

export const createLoggerSchema = {
  tags: ['loggers'],
  operationId: 'createLogger',
  security: SIGNED_IN,
  summary: 'Create a logger owned by the caller',
  body: nameBody,
  response: { 201: loggerRecord, 400: errorBody, 401: errorBody },
};

/** `POST /v1/loggers`: 201 with the new logger, the caller its sole owner. */
export function registerCreateLogger(app: ServiceApp, { loggers, access }: RouteDeps): void {
  app.post('/v1/loggers', { schema: createLoggerSchema }, async (request, reply) => {
    const owner = access.requireUser(request);
    return reply.code(201).send(await loggers.create(request.body.name, owner));
  });
}
