import { Type } from 'typebox';
import type { Settings } from '../../../config.ts';
import type { ServiceApp } from '../../../core/app.ts';
import { forbidden, unauthorized, validationError } from '../../../core/errors.ts';
import { identityOf } from '../../../core/identity.ts';
import type { SqlConnection } from '../../../store/db.ts';
import { clearSessionCookie } from '../cookies.ts';
import { normaliseEmail, verifyPassword } from '../credentials.ts';
import { loginResponseSchema, startSession } from '../login.ts';
import { createSession, deleteSession, findUserByEmail, takeSsoCode } from '../repository.ts';
import { errorResponse, loginBody } from '../schemas.ts';
import type { LoginThrottle } from '../throttle.ts';

/** One message for an unknown email, a wrong password and a user without a password. */
export const INVALID_CREDENTIALS = 'invalid email or password';

export interface SessionRoutesDeps {
  connection: SqlConnection;
  settings: Pick<Settings, 'domain' | 'cookieSecure'>;
  throttle: LoginThrottle;
}

/** `POST /v0/login`, `POST /v0/logout` (gateway.md §5.1, §5.2) and `POST /v0/session/token`. */
export async function registerSessionRoutes(app: ServiceApp, { connection, settings, throttle }: SessionRoutesDeps): Promise<void> {
  const tags = ['sessions'];

  app.post(
    '/v0/login',
    {
      schema: {
        tags,
        summary: 'Log in with email and password; sets the stratus_session cookie',
        body: loginBody,
        response: { 200: loginResponseSchema, 400: errorResponse, 401: errorResponse, 429: errorResponse },
      },
    },
    async (request, reply) => {
      const email = normaliseEmail(request.body.email);
      await throttle.attempt(email);
      const user = await findUserByEmail(connection, email);
      // Unknown users and users without a password are checked against a dummy hash, so all three
      // failures take as long as one another and answer alike.
      const valid = await verifyPassword(request.body.password, user?.passwordHash);
      if (!user || !valid) throw unauthorized(INVALID_CREDENTIALS);
      await throttle.succeeded(email);
      return startSession(reply, connection, user, settings);
    },
  );

  // Logout ignores any request body: a client logging out must not fail on what it sent along.
  await app.register(async (scope: ServiceApp) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, _body, done) => done(null, undefined));
    scope.post(
      '/v0/logout',
      {
        schema: {
          tags,
          security: [{ gatewayIdentity: [] }],
          summary: 'End the caller’s session and clear the cookie (204 also without a session)',
          response: { 204: Type.Null() },
        },
      },
      async (request, reply) => {
        const sessionId = identityOf(request)?.session?.id;
        if (typeof sessionId === 'string' && sessionId !== '') await deleteSession(connection, sessionId);
        return reply.code(204).header('set-cookie', clearSessionCookie(settings)).header('cache-control', 'no-store').send(null);
      },
    );

  });

  // The web console calls many hosts with a bearer session of its own: where the session cookie
  // cannot span them (`localhost` cookies are host-only) it trades the one-time code a single
  // sign-on put in its redirect, or a session it already has, for a new bearer session. Never an
  // API key's identity.
  app.post(
    '/v0/session/token',
    {
      schema: {
        tags,
        security: [{ gatewayIdentity: [] }],
        summary: "Trade the single sign-on's one-time code (body {code}), or the current session, for a new bearer session token",
        description: 'Body: none (trade the current session) or {"code": "<sso_code from the sign-on redirect>"}.',
        response: { 200: Type.Object({ token: Type.String(), expires_at: Type.String() }), 400: errorResponse, 401: errorResponse, 403: errorResponse },
      },
    },
    async (request, reply) => {
      let userId: string;
      const body = request.body as { code?: unknown } | undefined | null;
      const code = body?.code;
      if (body !== undefined && body !== null && (typeof body !== 'object' || Array.isArray(body) || typeof code !== 'string' || code === '' || Object.keys(body).some((k) => k !== 'code'))) {
        throw validationError('the body must be empty or {"code": "<sign-in code>"}');
      }
      if (typeof code === 'string') {
        const found = await takeSsoCode(connection, code);
        if (!found) throw unauthorized('unknown, used or expired sign-in code; sign in again');
        userId = found;
      } else {
        const identity = identityOf(request);
        if (!identity) throw unauthorized();
        if (identity.auth?.method !== 'session' || !identity.session?.id) throw forbidden('a signed-in session is required (API keys cannot start sessions)');
        userId = identity.user.id;
      }
      const { token, session } = await createSession(connection, userId);
      return reply.header('cache-control', 'no-store').send({ token, expires_at: new Date(session.expiresAt).toISOString() });
    },
  );
}
