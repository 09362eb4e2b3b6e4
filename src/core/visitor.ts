import type { FastifyRequest } from 'fastify';
import { IDENTITY_HEADER, identityOf } from './identity.ts';
import { isPlatformCookiePair } from './platform-cookie.ts';
import { TRIGGER_HEADER } from './trigger.ts';

/**
 * The request headers user code (a lambda, a container) sees (lower-case keys; a repeated header joined with ", "). Of the
 * gateway's identity only what its owner may know of a visitor is left: the user's id and
 * email, as `{"user":{"id","email"}}` in X-Gateway-Authentication. Session, authentication method,
 * API key and project details never reach user code; without a usable identity the header is absent.
 * Platform cookies (`stratus_…`) are left out of Cookie as well: the gateway already removes the
 * session cookie on the public port, and this holds on the internal port too.
 */
export function visitorHeaders(request: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(request.headers)) {
    // The trigger header is the platform's word to this service; the run sees it as ctx.trigger.
    if (v === undefined || k === IDENTITY_HEADER || k === TRIGGER_HEADER) continue;
    out[k] = Array.isArray(v) ? v.join(', ') : v;
  }
  if (out.cookie !== undefined) {
    const kept = out.cookie
      .split(';')
      .map((part) => part.trim())
      .filter((part) => part !== '' && !isPlatformCookiePair(part));
    if (kept.length > 0) out.cookie = kept.join('; ');
    else delete out.cookie;
  }
  const identity = identityOf(request);
  if (identity) {
    const { id, email } = identity.user;
    out[IDENTITY_HEADER] = JSON.stringify({ user: typeof email === 'string' && email !== '' ? { id, email } : { id } });
  }
  return out;
}
