import type { ServiceApp } from '../../../../core/app.ts';
import { LogsErrors } from '../../errors.ts';
import { owners, ownerParams, scoped, scopedErrors } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

export const removeOwnerSchema = {
  tags: ['loggers'],
  operationId: 'removeLoggerOwner',
  security: SIGNED_IN,
  summary: 'Remove an owner other than yourself; returns the owners',
  description: `${scoped} Removing yourself or the last owner → 400; a user who is not an owner → 404.`,
  params: ownerParams,
  response: { 200: owners, ...scopedErrors },
};

/** `DELETE /v1/loggers/:id/owners/:ownerId`: the owners after the change; a logger keeps at least one. */
export function registerRemoveOwner(app: ServiceApp, { loggers, access }: RouteDeps): void {
  app.delete('/v1/loggers/:id/owners/:ownerId', { schema: removeOwnerSchema }, async (request) => {
    const { loggerId, userId } = await access.authorize(request, request.params.id);
    const ownerId = request.params.ownerId;
    if (userId !== null && userId === ownerId) throw LogsErrors.ownerSelfRemoval();
    const result = await loggers.deleteOwner(loggerId, ownerId);
    if (result.status === 'deleted') return result.owners;
    if (result.status === 'last_owner') throw LogsErrors.lastOwner();
    if (result.status === 'not_owner') throw LogsErrors.ownerNotFound();
    throw LogsErrors.loggerNotFound();
  });
}
