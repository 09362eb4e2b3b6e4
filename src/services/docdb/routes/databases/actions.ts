import type { ServiceApp } from '../../../../core/app.ts';
import { databaseParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { createApiKey, deleteApiKey } from './api-keys.ts';
import { methodNotAllowed, requireAction, targetOf } from './common.ts';
import { addOwner, deleteOwner } from './owners.ts';

/** Hidden from the generated document: routes/action-docs.ts describes each action as its own path. */
export const databaseActionsSchema = { hide: true, params: databaseParams };

/**
 * The colon actions (`POST /v1/databases/{id}:createApiKey` …): one route for all of them. Each
 * checks its body before access, as every database route does.
 */
export function registerDatabaseActions(app: ServiceApp, deps: RouteDeps): void {
  app.post(
    '/v1/databases/:databaseId',
    { schema: databaseActionsSchema, onRequest: requireAction },
    async (request, reply) => {
      const target = targetOf(request);
      switch (target.action) {
        case 'createApiKey':
          return createApiKey(deps, request, reply, target.name);
        case 'deleteApiKey':
          return deleteApiKey(deps, request, reply, target.name);
        case 'addOwner':
          return addOwner(deps, request, reply, target.name);
        case 'deleteOwner':
          return deleteOwner(deps, request, reply, target.name);
        case null:
          break;
      }
      throw methodNotAllowed(request, 'GET, PATCH, DELETE');
    },
  );
}
