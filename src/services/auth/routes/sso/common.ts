import type { FastifyRequest } from 'fastify';
import { AuthErrors } from '../../errors.ts';
import { callerSchemeAndPort } from '../../../../core/host.ts';
import {
  InvalidTokenError,
  ProviderError,
  UnknownProviderError,
  linkOrCreateUser,
  type ProviderSettings,
} from '../../oidc.ts';
import type { User } from '../../repository.ts';
import type { RouteDeps } from '../deps.ts';

/**
 * What the single sign-on routes share (README: Single sign-on):
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

/** A login attempt must come back within 10 minutes (README: Single sign-on, flow). */
export const SSO_STATE_TTL_MS = 10 * 60 * 1000;

export const b64url = (bytes: Buffer) => bytes.toString('base64url');

/** `<scheme>://<name>.<domain>[:port]` as the browser reached the platform. */
export function platformOrigin(request: FastifyRequest, name: string, domain: string): string {
  const { scheme, port } = callerSchemeAndPort(request.headers);
  return `${scheme}://${name}.${domain}${port ? `:${port}` : ''}`;
}

export function callbackUri(request: FastifyRequest, provider: string, domain: string): string {
  return `${platformOrigin(request, 'auth', domain)}/v0/sso/${encodeURIComponent(provider)}/callback`;
}

/** Maps the OIDC layer's errors to the service's HTTP errors; anything else passes unchanged. */
export function httpError({ logger }: RouteDeps, error: unknown, provider: string): unknown {
  if (error instanceof UnknownProviderError) return AuthErrors.unknownProvider(error.provider);
  if (error instanceof ProviderError) {
    logger.warn({ provider, reason: error.message }, 'single sign-on provider failure');
    return AuthErrors.providerFailed(error.message);
  }
  if (error instanceof InvalidTokenError) return AuthErrors.idTokenRejected(error.message);
  return error;
}

/** The configured provider of that name; 404 when there is none. */
export function providerNamed({ providers }: RouteDeps, name: string): ProviderSettings {
  const provider = providers.get(name);
  if (!provider) throw AuthErrors.unknownProvider(name);
  return provider;
}

/** Finds or creates the user of a verified token; 403 when none may be used. */
export async function userFor(
  { connection, settings, logger }: RouteDeps,
  provider: ProviderSettings,
  claims: Parameters<typeof linkOrCreateUser>[2],
): Promise<User> {
  const outcome = await linkOrCreateUser(connection, provider, claims, settings);
  if (!outcome.user) {
    logger.info(
      { provider: provider.name, reason: outcome.reason },
      'single sign-on refused: no account for the identity',
    );
    throw AuthErrors.noAccount(outcome.message);
  }
  if (outcome.created || outcome.linked) {
    logger.info(
      { provider: provider.name, userId: outcome.user.id, created: outcome.created },
      'single sign-on identity linked',
    );
  }
  return outcome.user;
}
