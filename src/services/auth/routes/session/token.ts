import type { ServiceApp } from '../../../../core/app.ts';
import { identityOf } from '../../../../core/identity.ts';
import { AuthErrors } from '../../errors.ts';
import { CODE_VERIFIER_PATTERN, verifierMatches } from '../../handover.ts';
import { createSession, findSessionById, takeSsoCode } from '../../repository.ts';
import { errorResponse, sessionToken } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN_OR_ANONYMOUS } from '../../../../core/openapi.ts';

export const sessionTokenSchema = {
  tags: ['sessions'],
  operationId: 'createSessionToken',
  // A one-time sign-on code needs no credentials; trading the current session needs it.
  security: SIGNED_IN_OR_ANONYMOUS,
  summary:
    "Trade the single sign-on's one-time code (body {code, code_verifier}), or the current session (cookie or bearer), for a new bearer session token",
  description:
    'Body: none (trade the current session: a stratus_session cookie or Authorization: Bearer <session token>) or {"code": "<sso_code from the sign-on redirect>", "code_verifier": "<the verifier whose S256 challenge was sent to /v0/sso/{provider}/login>"}. A code works once, for 60 s, and only with its verifier; a wrong or missing verifier burns it.',
  response: { 200: sessionToken, 400: errorResponse, 401: errorResponse, 403: errorResponse },
};

/**
 * `POST /v0/session/token` (README: The hand-over code). The web console calls many hosts with a
 * bearer session of its own (the session cookie is host-only and never reaches them): it trades
 * the one-time code a single sign-on put in its redirect (with the verifier that binds it to the
 * console that started the sign-in), or a session it already has (cookie or bearer), for a new
 * bearer session. Never an API key's identity or a provider JWT's.
 */
export function registerSessionToken(app: ServiceApp, { connection }: RouteDeps): void {
  app.post('/v0/session/token', { schema: sessionTokenSchema }, async (request, reply) => {
    let userId: string;
    const body = request.body as { code?: unknown; code_verifier?: unknown } | undefined | null;
    const code = body?.code;
    const verifier = body?.code_verifier;
    if (
      body !== undefined &&
      body !== null &&
      (typeof body !== 'object' ||
        Array.isArray(body) ||
        typeof code !== 'string' ||
        code === '' ||
        Object.keys(body).some((k) => k !== 'code' && k !== 'code_verifier'))
    ) {
      throw AuthErrors.sessionTokenBodyInvalid();
    }
    if (verifier !== undefined && (typeof verifier !== 'string' || !CODE_VERIFIER_PATTERN.test(verifier))) {
      throw AuthErrors.codeVerifierInvalid();
    }
    if (typeof code === 'string') {
      // Taken (deleted) before the binding is checked: a code presented without its verifier is burned.
      const found = await takeSsoCode(connection, code);
      if (!found) throw AuthErrors.ssoCodeUnknown();
      if (typeof verifier !== 'string' || found.challenge === null || !verifierMatches(verifier, found.challenge)) {
        throw AuthErrors.ssoCodeUnbound();
      }
      userId = found.userId;
    } else {
      const identity = identityOf(request);
      if (!identity) throw AuthErrors.authenticationRequired();
      const method = identity.auth?.method;
      const sessionId = identity.session?.id;
      if ((method !== 'session' && method !== 'bearer') || typeof sessionId !== 'string' || sessionId === '') {
        throw AuthErrors.sessionRequired();
      }
      // The session the identity names must still be the caller's: it may have ended since the
      // gateway looked it up, and a trusted caller of the internal port must not borrow another's.
      const live = await findSessionById(connection, sessionId);
      if (!live || live.userId !== identity.user.id) throw AuthErrors.sessionEnded();
      userId = identity.user.id;
    }
    const { token, session } = await createSession(connection, userId);
    return reply
      .header('cache-control', 'no-store')
      .send({ token, expires_at: new Date(session.expiresAt).toISOString() });
  });
}
