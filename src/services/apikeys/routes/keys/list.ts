import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { errorResponse, keyList } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

export const listKeysSchema = {
  tags: ['apikeys'],
  operationId: 'listApiKeys',
  security: SIGNED_IN,
  summary: "List the caller's API keys in creation order (no secrets)",
  response: { 200: keyList, 401: errorResponse },
};

/** `GET /v0/apikeys`: the caller's keys, never a secret or its hash. */
export function registerListKeys(app: ServiceApp, { repository }: RouteDeps): void {
  app.get('/v0/apikeys', { schema: listKeysSchema }, async (request) => {
    const identity = requireIdentity(request);
    return { api_keys: await repository.listKeys(identity.user.id) };
  });
}
