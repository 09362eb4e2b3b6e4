import { Type } from 'typebox';
import type { Settings } from '../../../config.ts';
import type { ServiceApp } from '../../../core/app.ts';
import { forbidden, unauthorized, validationError } from '../../../core/errors.ts';
import { identityOf } from '../../../core/identity.ts';
import type { SqlConnection } from '../../../store/db.ts';
import { clearSessionCookie } from '../cookies.ts';
import { normaliseEmail, verifyPassword } from '../credentials.ts';
import { loginResponseSchema, startSession } from '../login.ts';
import { CODE_VERIFIER_PATTERN, verifierMatches } from '../handover.ts';
import { createSession, deleteSession, findSessionById, findUserByEmail, takeSsoCode } from '../repository.ts';
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

  // The web console calls many hosts with a bearer session of its own (the session cookie is
  // host-only and never reaches them): it trades the one-time code a single
  // sign-on put in its redirect (with the verifier that binds it to the console that started the
  // sign-in), or a session it already has (cookie or bearer), for a new bearer session. Never an
  // API key's identity or a provider JWT's.
  app.post(
    '/v0/session/token',
    {
      schema: {
        tags,
        security: [{ gatewayIdentity: [] }],
        summary: "Trade the single sign-on's one-time code (body {code, code_verifier}), or the current session (cookie or bearer), for a new bearer session token",
        description:
          'Body: none (trade the current session: a stratus_session cookie or Authorization: Bearer <session token>) or {"code": "<sso_code from the sign-on redirect>", "code_verifier": "<the verifier whose S256 challenge was sent to /v0/sso/{provider}/login>"}. A code works once, for 60 s, and only with its verifier; a wrong or missing verifier burns it.',
        response: { 200: Type.Object({ token: Type.String(), expires_at: Type.String() }), 400: errorResponse, 401: errorResponse, 403: errorResponse },
      },
    },
    async (request, reply) => {
      let userId: string;
      const body = request.body as { code?: unknown; code_verifier?: unknown } | undefined | null;
      const code = body?.code;
      const verifier = body?.code_verifier;
      if (
        body !== undefined &&
        body !== null &&
        (typeof body !== 'object' || Array.isArray(body) || typeof code !== 'string' || code === '' || Object.keys(body).some((k) => k !== 'code' && k !== 'code_verifier'))
      ) {
        throw validationError('the body must be empty or {"code": "<sign-in code>", "code_verifier": "<verifier>"}');
      }
      if (verifier !== undefined && (typeof verifier !== 'string' || !CODE_VERIFIER_PATTERN.test(verifier))) {
        throw validationError('code_verifier must be 43–128 characters of A–Z, a–z, 0–9, "-", ".", "_" and "~"');
      }
      if (typeof code === 'string') {
        // Taken (deleted) before the binding is checked: a code presented without its verifier is burned.
        const found = await takeSsoCode(connection, code);
        if (!found) throw unauthorized('unknown, used or expired sign-in code; sign in again');
        if (typeof verifier !== 'string' || found.challenge === null || !verifierMatches(verifier, found.challenge)) {
          throw unauthorized('the sign-in code belongs to the page that started the sign-in and its code_verifier did not come with it; the code is now used up, sign in again');
        }
        userId = found.userId;
      } else {
        const identity = identityOf(request);
        if (!identity) throw unauthorized();
        const method = identity.auth?.method;
        const sessionId = identity.session?.id;
        if ((method !== 'session' && method !== 'bearer') || typeof sessionId !== 'string' || sessionId === '') {
          throw forbidden('a signed-in session (cookie or bearer session token) is required; API keys and provider tokens cannot start sessions');
        }
        // The session the identity names must still be the caller's: it may have ended since the
        // gateway looked it up, and a trusted caller of the internal port must not borrow another's.
        const live = await findSessionById(connection, sessionId);
        if (!live || live.userId !== identity.user.id) throw unauthorized('the session has ended; sign in again');
        userId = identity.user.id;
      }
      const { token, session } = await createSession(connection, userId);
      return reply.header('cache-control', 'no-store').send({ token, expires_at: new Date(session.expiresAt).toISOString() });
    },
  );
}
