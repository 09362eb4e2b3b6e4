import type { ServiceApp } from '../../../../core/app.ts';
import { LogsErrors } from '../../errors.ts';
import { keyParams, noContent, scoped, scopedErrors } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

export const deleteKeySchema = {
  tags: ['loggers'],
  operationId: 'deleteLoggerApiKey',
  security: SIGNED_IN,
  summary: 'Delete a logger API key (by its id); it stops working at once',
  description: scoped,
  params: keyParams,
  response: { 204: noContent, ...scopedErrors },
};

/** `DELETE /v1/loggers/:id/apiKeys/:apiKey`: 204; the revocation reaches every instance. */
export function registerDeleteKey(app: ServiceApp, { loggers, access }: RouteDeps): void {
  app.delete('/v1/loggers/:id/apiKeys/:apiKey', { schema: deleteKeySchema }, async (request, reply) => {
    const { loggerId } = await access.authorize(request, request.params.id);
    const key = await loggers.deleteKey(loggerId, request.params.apiKey);
    if (key === null) throw LogsErrors.keyNotFound();
    await access
      .revoke({ key })
      .catch((error: unknown) => request.log.warn({ err: error }, 'logs key revocation not published'));
    return reply.code(204).send(null);
  });
}
