import type { ServiceApp } from '../../../core/app.ts';
import { unauthorized } from '../../../core/errors.ts';
import { requireIdentity } from '../../../core/identity.ts';
import type { SqlConnection } from '../../../store/db.ts';
import { findUserById } from '../repository.ts';
import { errorResponse, userRecord } from '../schemas.ts';

/** `GET /v0/me` (gateway.md §5.3): the caller's user record. */
export function registerMeRoute(app: ServiceApp, { connection }: { connection: SqlConnection }): void {
  app.get(
    '/v0/me',
    {
      schema: {
        tags: ['users'],
        security: [{ gatewayIdentity: [] }],
        summary: 'The authenticated user: {id, email, nick, picture, created_at}',
        response: { 200: userRecord, 401: errorResponse },
      },
    },
    async (request) => {
      const identity = requireIdentity(request);
      const user = await findUserById(connection, identity.user.id);
      // A credential whose user no longer exists identifies nobody: the caller must log in again.
      if (!user) throw unauthorized('the authenticated user no longer exists');
      return user;
    },
  );
}
