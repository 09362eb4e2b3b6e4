import { createHash, randomBytes } from 'node:crypto';
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Settings } from '../../../config.ts';
import type { ServiceApp } from '../../../core/app.ts';
import { HttpError, forbidden, notFound, unauthorized, validationError } from '../../../core/errors.ts';
import type { SqlConnection } from '../../../store/db.ts';
import { sessionCookie } from '../cookies.ts';
import { CODE_CHALLENGE_PATTERN, REDIRECT_MAX_LENGTH, allowedRedirectOrigins, redirectTarget } from '../handover.ts';
import { loginResponseSchema, startSession } from '../login.ts';
import { InvalidTokenError, OidcProviders, ProviderError, UnknownProviderError, linkOrCreateUser, type ProviderSettings } from '../oidc.ts';
import { createSession, createSsoCode, saveSsoState, takeSsoState, type User } from '../repository.ts';
import { errorResponse } from '../schemas.ts';

/**
 * Single sign-on with OpenID Connect providers (gateway.md §5.5–§5.8):
 *
 * - `GET /v0/sso/{provider}/login?redirect=&code_challenge=` → 302 to the provider (code flow, state,
 *   nonce, PKCE S256). `redirect` must be on the console's origin or an allow-listed one;
 *   `code_challenge` (optional) asks for a hand-over code bound to its verifier (handover.ts);
 * - `GET /v0/sso/{provider}/callback?code&state` → exchanges the code, validates the ID token,
 *   finds or creates the user, sets the session cookie, 302 to the stored redirect target, with
 *   `sso_code` added when the sign-in was started with a `code_challenge`;
 * - `POST /v0/sso/{provider}/token {id_token}` → for a console that ran the flow itself.
 *
 * The redirect URI sent to the provider is `<scheme>://auth.<domain>[:port]/v0/sso/{provider}/callback`,
 * the scheme from `X-Forwarded-Proto` (set by the gateway) else `http`, the port the browser used
 * (from `X-Forwarded-Host`, else `Host`) unless it is the scheme's default.
 */

/** A login attempt must come back within 10 minutes (gateway.md §5.6). */
export const SSO_STATE_TTL_MS = 10 * 60 * 1000;

export interface SsoRoutesDeps {
  connection: SqlConnection;
  settings: Settings;
  logger: FastifyBaseLogger;
  /** Share one provider cache (discovery, JWKS) with other users; built from `settings.authProviders` when absent. */
  providers?: OidcProviders;
}

const providerParams = Type.Object({ provider: Type.String({ description: 'The configured provider name' }) }, { additionalProperties: false });

const loginQuery = Type.Object(
  {
    redirect: Type.Optional(
      Type.String({
        maxLength: REDIRECT_MAX_LENGTH,
        description: "Where the browser goes after signing in: a path (on the console) or a URL on the console's origin or on an origin listed in SSO_REDIRECT_ORIGINS. Default: the console.",
      }),
    ),
    code_challenge: Type.Optional(
      Type.String({
        pattern: CODE_CHALLENGE_PATTERN.source,
        description:
          'BASE64URL(SHA-256(code_verifier)) of a verifier the page keeps: the redirect then carries a one-time sso_code that only that verifier can trade at POST /v0/session/token. Without it no code is issued.',
      }),
    ),
    code_challenge_method: Type.Optional(Type.Literal('S256', { description: 'Only S256' })),
  },
  { additionalProperties: true },
);

const callbackQuery = Type.Object(
  {
    code: Type.Optional(Type.String({ maxLength: 4096, description: 'Authorization code' })),
    state: Type.Optional(Type.String({ maxLength: 512, description: 'The state sent with the login redirect' })),
    error: Type.Optional(Type.String({ maxLength: 256, description: 'OAuth error from the provider (e.g. access_denied)' })),
    error_description: Type.Optional(Type.String({ maxLength: 4096 })),
    iss: Type.Optional(Type.String({ maxLength: 2048, description: 'Issuer of the authorization response (RFC 9207); must be the provider when present' })),
  },
  // Providers add members of their own (session_state, scope, authuser…).
  { additionalProperties: true },
);

const tokenBody = Type.Object(
  { id_token: Type.String({ minLength: 1, maxLength: 16384, description: 'An ID token issued by the provider to its configured client id' }) },
  { additionalProperties: false },
);

const redirectResponse = (description: string) => Type.Null({ description });

const b64url = (bytes: Buffer) => bytes.toString('base64url');

function firstHeader(value: string | string[] | undefined): string | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  return text?.split(',')[0]?.trim() || undefined;
}

/** Scheme and port the browser used, as the gateway reports them (`X-Forwarded-*`) or the request shows. */
function browserOrigin(request: FastifyRequest): { scheme: 'http' | 'https'; port: string | null } {
  const scheme = firstHeader(request.headers['x-forwarded-proto'])?.toLowerCase() === 'https' ? 'https' : 'http';
  const host = firstHeader(request.headers['x-forwarded-host']) ?? firstHeader(request.headers.host) ?? '';
  const port = /:(\d{1,5})$/.exec(host)?.[1] ?? null;
  const isDefault = port === null || (scheme === 'http' && port === '80') || (scheme === 'https' && port === '443');
  return { scheme, port: isDefault ? null : String(Number(port)) };
}

function platformOrigin(request: FastifyRequest, name: string, domain: string): string {
  const { scheme, port } = browserOrigin(request);
  return `${scheme}://${name}.${domain}${port ? `:${port}` : ''}`;
}

function callbackUri(request: FastifyRequest, provider: string, domain: string): string {
  return `${platformOrigin(request, 'auth', domain)}/v0/sso/${encodeURIComponent(provider)}/callback`;
}

/** Maps the OIDC layer's errors to the service's HTTP errors; anything else passes unchanged. */
function httpError(error: unknown, logger: FastifyBaseLogger, provider: string): unknown {
  if (error instanceof UnknownProviderError) return notFound(error.message);
  if (error instanceof ProviderError) {
    logger.warn({ provider, reason: error.message }, 'single sign-on provider failure');
    return new HttpError(502, 'provider_error', error.message);
  }
  if (error instanceof InvalidTokenError) return new HttpError(401, 'invalid_token', `ID token rejected: ${error.message}`);
  return error;
}

export function registerSsoRoutes(app: ServiceApp, deps: SsoRoutesDeps): void {
  const { connection, settings, logger } = deps;
  const providers = deps.providers ?? new OidcProviders(settings.authProviders);
  const tags = ['single sign-on'];
  const domain = settings.domain;
  // Checked when the service is built: a bad allow-list stops the platform from starting.
  const allowedOrigins = allowedRedirectOrigins(settings);

  const providerNamed = (name: string): ProviderSettings => {
    const provider = providers.get(name);
    if (!provider) throw notFound(`unknown single sign-on provider '${name.slice(0, 100)}'`);
    return provider;
  };

  /** Finds or creates the user of a verified token; 403 when none may be used. */
  const userFor = async (provider: ProviderSettings, claims: Parameters<typeof linkOrCreateUser>[2]): Promise<User> => {
    const outcome = await linkOrCreateUser(connection, provider, claims, settings);
    if (!outcome.user) {
      logger.info({ provider: provider.name, reason: outcome.reason }, 'single sign-on refused: no account for the identity');
      throw forbidden(outcome.message);
    }
    if (outcome.created || outcome.linked) {
      logger.info({ provider: provider.name, userId: outcome.user.id, created: outcome.created }, 'single sign-on identity linked');
    }
    return outcome.user;
  };

  app.get(
    '/v0/sso/:provider/login',
    {
      // No implicit HEAD: it would create a state (login) or spend one and the code (callback).
      exposeHeadRoute: false,
      schema: {
        tags,
        summary: 'Start signing in with a provider: 302 to its authorization endpoint (code flow with state, nonce and PKCE S256)',
        params: providerParams,
        querystring: loginQuery,
        response: {
          302: redirectResponse('Redirect to the provider; Location carries response_type=code, client_id, redirect_uri, scope, state, nonce, code_challenge, code_challenge_method=S256'),
          400: errorResponse,
          404: errorResponse,
          502: errorResponse,
        },
      },
    },
    async (request, reply) => {
      const provider = providerNamed(request.params.provider);
      const redirect = redirectTarget(request.query.redirect, platformOrigin(request, 'console', domain), allowedOrigins);
      const codeChallenge = request.query.code_challenge ?? null;
      if (request.query.code_challenge_method !== undefined && codeChallenge === null) throw validationError('code_challenge_method needs a code_challenge');
      let authorizationEndpoint: string;
      try {
        authorizationEndpoint = (await providers.discover(provider.name)).authorization_endpoint;
      } catch (error) {
        throw httpError(error, logger, provider.name);
      }
      const state = b64url(randomBytes(32));
      const nonce = b64url(randomBytes(32));
      const verifier = b64url(randomBytes(32));
      await saveSsoState(connection, { state, provider: provider.name, nonce, verifier, redirect, codeChallenge, expiresAt: Date.now() + SSO_STATE_TTL_MS });
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

  app.get(
    '/v0/sso/:provider/callback',
    {
      // No implicit HEAD: it would create a state (login) or spend one and the code (callback).
      exposeHeadRoute: false,
      schema: {
        tags,
        summary: 'Where the provider sends the browser back: validates state and ID token, starts a session, 302 to the redirect target',
        params: providerParams,
        querystring: callbackQuery,
        response: {
          302: redirectResponse('Signed in: Set-Cookie stratus_session, Location is the redirect target given to /login'),
          400: errorResponse,
          401: errorResponse,
          403: errorResponse,
          404: errorResponse,
          502: errorResponse,
        },
      },
    },
    async (request, reply) => {
      const provider = providerNamed(request.params.provider);
      const { code, state, error } = request.query;
      const stored = state ? await takeSsoState(connection, state) : null;
      if (!stored || stored.provider !== provider.name) {
        throw new HttpError(400, 'invalid_state', 'unknown, used or expired sign-in state; start the sign-in again');
      }
      if (error !== undefined) {
        const reason = /^[\w.-]{1,64}$/.test(error) ? ` (${error})` : '';
        throw unauthorized(`the identity provider did not sign you in${reason}`);
      }
      const iss = request.query.iss;
      if (iss !== undefined && iss.replace(/\/$/, '') !== provider.issuer.replace(/\/$/, '')) {
        throw unauthorized('the authorization response comes from another issuer');
      }
      if (!code) throw validationError('querystring must have code or error');

      let user: User;
      try {
        const { idToken } = await providers.exchangeCode(provider.name, { code, redirectUri: callbackUri(request, provider.name, domain), verifier: stored.verifier });
        const { claims } = await providers.verifyIdToken(idToken, { provider: provider.name, nonce: stored.nonce });
        user = await userFor(provider, claims);
      } catch (caught) {
        throw httpError(caught, logger, provider.name);
      }
      const { token } = await createSession(connection, user.id);
      // The cookie serves pages that share it. A page that started the sign-in with a code_challenge
      // (the web console, whose origin the cookie does not reach) gets a one-time code in the
      // redirect, which only the matching verifier trades for a bearer session at
      // POST /v0/session/token. Without a challenge there is nothing to bind a code to: none is issued.
      const target = new URL(stored.redirect);
      if (stored.codeChallenge) target.searchParams.set('sso_code', await createSsoCode(connection, user.id, stored.codeChallenge));
      return reply
        .header('set-cookie', sessionCookie(token, settings))
        .header('cache-control', 'no-store')
        .header('referrer-policy', 'no-referrer')
        .redirect(target.href, 302);
    },
  );

  app.post(
    '/v0/sso/:provider/token',
    {
      // Unknown providers answer 404 before the body is looked at.
      onRequest: async (request) => {
        providerNamed((request.params as { provider: string }).provider);
      },
      schema: {
        tags,
        summary: 'Sign in with an ID token the caller obtained from the provider itself; sets the stratus_session cookie',
        params: providerParams,
        body: tokenBody,
        response: { 200: loginResponseSchema, 400: errorResponse, 401: errorResponse, 403: errorResponse, 404: errorResponse, 502: errorResponse },
      },
    },
    async (request, reply) => {
      const provider = providerNamed(request.params.provider);
      let user: User;
      try {
        const { claims } = await providers.verifyIdToken(request.body.id_token, { provider: provider.name });
        user = await userFor(provider, claims);
      } catch (caught) {
        throw httpError(caught, logger, provider.name);
      }
      return startSession(reply, connection, user, settings);
    },
  );
}
