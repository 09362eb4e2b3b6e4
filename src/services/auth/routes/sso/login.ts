import { createHash, randomBytes } from 'node:crypto';
import type { ServiceApp } from '../../../../core/app.ts';
import { AuthErrors } from '../../errors.ts';
import { allowedRedirectOrigins, redirectTarget } from '../../handover.ts';
import { saveSsoState } from '../../repository.ts';
import { errorResponse, providerParams, redirectResponse, ssoLoginQuery } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SSO_STATE_TTL_MS, b64url, callbackUri, httpError, platformOrigin, providerNamed } from './common.ts';
import { ANONYMOUS } from '../../../../core/openapi.ts';

export const ssoLoginSchema = {
  tags: ['single sign-on'],
  operationId: 'startSsoLogin',
  security: ANONYMOUS,
  summary:
    'Start signing in with a provider: 302 to its authorization endpoint (code flow with state, nonce and PKCE S256)',
  params: providerParams,
  querystring: ssoLoginQuery,
  response: {
    302: redirectResponse(
      'Redirect to the provider; Location carries response_type=code, client_id, redirect_uri, scope, state, nonce, code_challenge, code_challenge_method=S256',
    ),
    400: errorResponse,
    404: errorResponse,
    502: errorResponse,
  },
};

/** `GET /v0/sso/{provider}/login` (README: Single sign-on): 302 to the provider's authorization endpoint. */
export function registerSsoLogin(app: ServiceApp, deps: RouteDeps): void {
  const { connection, settings, providers } = deps;
  const domain = settings.domain;
  // Checked when the service is built: a bad allow-list stops the platform from starting.
  const allowedOrigins = allowedRedirectOrigins(settings);

  app.get(
    '/v0/sso/:provider/login',
    // No implicit HEAD: it would create a state (login) or spend one and the code (callback).
    { exposeHeadRoute: false, schema: ssoLoginSchema },
    async (request, reply) => {
      const provider = providerNamed(deps, request.params.provider);
      const redirect = redirectTarget(
        request.query.redirect,
        platformOrigin(request, 'console', domain),
        allowedOrigins,
      );
      const codeChallenge = request.query.code_challenge ?? null;
      if (request.query.code_challenge_method !== undefined && codeChallenge === null)
        throw AuthErrors.challengeMethodWithoutChallenge();
      let authorizationEndpoint: string;
      try {
        authorizationEndpoint = (await providers.discover(provider.name)).authorization_endpoint;
      } catch (error) {
        throw httpError(deps, error, provider.name);
      }
      const state = b64url(randomBytes(32));
      const nonce = b64url(randomBytes(32));
      const verifier = b64url(randomBytes(32));
      await saveSsoState(connection, {
        state,
        provider: provider.name,
        nonce,
        verifier,
        redirect,
        codeChallenge,
        expiresAt: Date.now() + SSO_STATE_TTL_MS,
      });
      const location = new URL(authorizationEndpoint);
      const query: Record<string, string> = {
        response_type: 'code',
        client_id: provider.clientId,
        redirect_uri: callbackUri(request, provider.name, domain),
        scope: 'openid email profile',
        state,
        nonce,
        code_challenge: b64url(createHash('sha256').update(verifier).digest()),
        code_challenge_method: 'S256',
      };
      for (const [name, value] of Object.entries(query)) location.searchParams.set(name, value);
      return reply.header('cache-control', 'no-store').redirect(location.href, 302);
    },
  );
}
