import type { ServiceApp } from '../../../../core/app.ts';
import { LogsErrors } from '../../errors.ts';
import { idParams, noContent, scoped, scopedErrors } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

export const deleteLoggerSchema = {
  tags: ['loggers'],
  operationId: 'deleteLogger',
  security: SIGNED_IN,
  summary: 'Delete a logger, its data and its keys',
  description: scoped,
  params: idParams,
  response: { 204: noContent, ...scopedErrors },
};

/** `DELETE /v1/loggers/:id`: 204; its streams end and its keys stop working on every instance. */
export function registerDeleteLogger(app: ServiceApp, { loggers, access, hub, stats }: RouteDeps): void {
  app.delete('/v1/loggers/:id', { schema: deleteLoggerSchema }, async (request, reply) => {
    const { loggerId } = await access.authorize(request, request.params.id);
    if (!(await loggers.delete(loggerId))) throw LogsErrors.loggerNotFound();
    await stats.forget(loggerId);
    // Open streams notice the deletion on their next wake-up; keys stop everywhere.
    await Promise.allSettled([access.revoke({ logger: loggerId }), hub.announce(loggerId)]);
    return reply.code(204).send(null);
  });
}
