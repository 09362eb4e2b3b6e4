import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { assertMayManage } from '../../access.ts';
import { ApikeysErrors } from '../../errors.ts';
import { commonErrors, errorResponse, keyParams, revokedKey } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

export const revokeKeySchema = {
  tags: ['apikeys'],
  operationId: 'revokeApiKey',
  security: SIGNED_IN,
  summary: 'Revoke an API key; it stops working on every gateway at once',
  params: keyParams,
  response: { 200: revokedKey, ...commonErrors, 403: errorResponse, 404: errorResponse },
};

/** `DELETE /v0/apikeys/{key}` (README: Revocation): deletes the key, then tells every gateway. */
export function registerRevokeKey(app: ServiceApp, { repository, events }: RouteDeps): void {
  app.delete('/v0/apikeys/:key', { schema: revokeKeySchema }, async (request) => {
    const identity = requireIdentity(request);
    await assertMayManage(identity, repository);
    const { key } = request.params;
    if (!(await repository.deleteKey(identity.user.id, key))) throw ApikeysErrors.keyNotFound(key);
    await events.keyRevoked({ key });
    return { key };
  });
}
