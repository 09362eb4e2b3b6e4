import type { ServiceApp } from '../../../../core/app.ts';
import { LogsErrors } from '../../errors.ts';
import { idParams, ownerBody, owners, scoped, scopedErrors } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

export const addOwnerSchema = {
  tags: ['loggers'],
  operationId: 'addLoggerOwner',
  security: SIGNED_IN,
  summary: 'Add an owner (an existing owner is no change); returns the owners',
  description: scoped,
  params: idParams,
  body: ownerBody,
  response: { 200: owners, ...scopedErrors },
};

/** `POST /v1/loggers/:id/owners`: the owners after the change, the new one last. */
export function registerAddOwner(app: ServiceApp, { loggers, access }: RouteDeps): void {
  app.post('/v1/loggers/:id/owners', { schema: addOwnerSchema }, async (request) => {
    const { loggerId } = await access.authorize(request, request.params.id);
    const result = await loggers.addOwner(loggerId, request.body.user_id);
    if (!result) throw LogsErrors.loggerNotFound();
    return result;
  });
}
