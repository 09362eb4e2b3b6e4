import type { ServiceApp } from '../../../../core/app.ts';
import { sessionCookie } from '../../cookies.ts';
import { AuthErrors } from '../../errors.ts';
import { createSession, createSsoCode, takeSsoState, type User } from '../../repository.ts';
import { errorResponse, providerParams, redirectResponse, ssoCallbackQuery } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { callbackUri, httpError, providerNamed, userFor } from './common.ts';
import { ANONYMOUS } from '../../../../core/openapi.ts';

export const ssoCallbackSchema = {
  tags: ['single sign-on'],
  operationId: 'finishSsoLogin',
  security: ANONYMOUS,
  summary:
    'Where the provider sends the browser back: validates state and ID token, starts a session, 302 to the redirect target',
  params: providerParams,
  querystring: ssoCallbackQuery,
  response: {
    302: redirectResponse('Signed in: Set-Cookie stratus_session, Location is the redirect target given to /login'),
    400: errorResponse,
    401: errorResponse,
    403: errorResponse,
    404: errorResponse,
    502: errorResponse,
  },
};

/**
 * `GET /v0/sso/{provider}/callback` (README: Single sign-on, The hand-over code): takes the state,
 * exchanges the code, starts a session and sends the browser to the redirect target.
 */
export function registerSsoCallback(app: ServiceApp, deps: RouteDeps): void {
  const { connection, settings, providers } = deps;
  const domain = settings.domain;

  app.get(
    '/v0/sso/:provider/callback',
    // No implicit HEAD: it would create a state (login) or spend one and the code (callback).
    { exposeHeadRoute: false, schema: ssoCallbackSchema },
    async (request, reply) => {
      const provider = providerNamed(deps, request.params.provider);
      const { code, state, error } = request.query;
      const stored = state ? await takeSsoState(connection, state) : null;
      if (!stored || stored.provider !== provider.name) throw AuthErrors.invalidState();
      if (error !== undefined) throw AuthErrors.providerDeclined(error);
      const iss = request.query.iss;
      if (iss !== undefined && iss.replace(/\/$/, '') !== provider.issuer.replace(/\/$/, ''))
        throw AuthErrors.issuerMismatch();
      if (!code) throw AuthErrors.callbackWithoutCode();

      let user: User;
      try {
        const { idToken } = await providers.exchangeCode(provider.name, {
          code,
          redirectUri: callbackUri(request, provider.name, domain),
          verifier: stored.verifier,
        });
        const { claims } = await providers.verifyIdToken(idToken, { provider: provider.name, nonce: stored.nonce });
        user = await userFor(deps, provider, claims);
      } catch (caught) {
        throw httpError(deps, caught, provider.name);
      }
      const { token } = await createSession(connection, user.id);
      // The cookie serves pages that share it. A page that started the sign-in with a code_challenge
      // (the web console, whose origin the cookie does not reach) gets a one-time code in the
      // redirect, which only the matching verifier trades for a bearer session at
      // POST /v0/session/token. Without a challenge there is nothing to bind a code to: none is issued.
      const target = new URL(stored.redirect);
      if (stored.codeChallenge)
        target.searchParams.set('sso_code', await createSsoCode(connection, user.id, stored.codeChallenge));
      return reply
        .header('set-cookie', sessionCookie(token, settings))
        .header('cache-control', 'no-store')
        .header('referrer-policy', 'no-referrer')
        .redirect(target.href, 302);
    },
  );
}
