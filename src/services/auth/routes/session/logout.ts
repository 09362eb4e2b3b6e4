import type { ServiceApp } from '../../../../core/app.ts';
import { identityOf } from '../../../../core/identity.ts';
import { clearSessionCookie } from '../../cookies.ts';
import { deleteSession } from '../../repository.ts';
import { noContent } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN_OR_ANONYMOUS } from '../../../../core/openapi.ts';

export const logoutSchema = {
  tags: ['sessions'],
  operationId: 'logOut',
  security: SIGNED_IN_OR_ANONYMOUS,
  summary: 'End the caller’s session and clear the cookie (204 also without a session)',
  response: { 204: noContent },
};

/**
 * `POST /v0/logout` (README: Logout): deletes the caller's session, if it has one, and clears the
 * cookie. Registered in a scope of its own, awaited so it keeps its place among the routes.
 */
export async function registerLogout(app: ServiceApp, { connection, settings }: RouteDeps): Promise<void> {
  // Logout ignores any request body: a client logging out must not fail on what it sent along.
  await app.register(async (scope: ServiceApp) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, _body, done) => done(null, undefined));
    scope.post('/v0/logout', { schema: logoutSchema }, async (request, reply) => {
      const sessionId = identityOf(request)?.session?.id;
      if (typeof sessionId === 'string' && sessionId !== '') await deleteSession(connection, sessionId);
      return reply
        .code(204)
        .header('set-cookie', clearSessionCookie(settings))
        .header('cache-control', 'no-store')
        .send(null);
    });
  });
}
