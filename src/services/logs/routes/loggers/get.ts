import type { ServiceApp } from '../../../../core/app.ts';
import { LogsErrors } from '../../errors.ts';
import { idParams, loggerRecord, scoped, scopedErrors } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

export const getLoggerSchema = {
  tags: ['loggers'],
  operationId: 'getLogger',
  security: SIGNED_IN,
  summary: 'Get a logger',
  description: scoped,
  params: idParams,
  response: { 200: loggerRecord, ...scopedErrors },
};

/** `GET /v1/loggers/:id`: the logger object. */
export function registerGetLogger(app: ServiceApp, { loggers, access }: RouteDeps): void {
  app.get('/v1/loggers/:id', { schema: getLoggerSchema }, async (request) => {
    await access.authorize(request, request.params.id);
    const record = await loggers.get(request.params.id);
    if (!record) throw LogsErrors.loggerNotFound();
    return record;
  });
}
