import type { ServiceApp } from '../../../core/app.ts';
import { requireIdentity } from '../../../core/identity.ts';
import { AuthErrors } from '../errors.ts';
import { findUserById } from '../repository.ts';
import { errorResponse, userRecord } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';
import { SIGNED_IN } from '../../../core/openapi.ts';

export const meSchema = {
  tags: ['users'],
  operationId: 'getMe',
  security: SIGNED_IN,
  summary: 'The authenticated user: {id, email, nick, picture, created_at}',
  response: { 200: userRecord, 401: errorResponse },
};

/** `GET /v0/me` (README: `GET /v0/me`): the caller's user record. */
export function registerMe(app: ServiceApp, { connection }: RouteDeps): void {
  app.get('/v0/me', { schema: meSchema }, async (request) => {
    const identity = requireIdentity(request);
    const user = await findUserById(connection, identity.user.id);
    // A credential whose user no longer exists identifies nobody: the caller must log in again.
    if (!user) throw AuthErrors.userGone();
    return user;
  });
}
