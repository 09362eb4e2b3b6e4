import { isIP } from 'node:net';
import { hostName, PLATFORM_HOSTS } from '../../core/host.ts';
import { isPlatformCookie } from '../../core/platform-cookie.ts';
import { visitorHeaders } from '../../core/visitor.ts';

export { isPlatformCookie, visitorHeaders };

/**
 * The rules for what lambda output may carry and what a lambda learns of its visitor (issue 17).
 * Every path that serves lambda output (`/run`, `/api/v0/run`, `/mux`, the project mux, static
 * lambdas) goes through here.
 */

/** Host labels of the platform's own services (README: Output rules); any other label is a project's host. */
export const PLATFORM_HOST_LABELS: ReadonlySet<string> = new Set<string>(PLATFORM_HOSTS);

/**
 * The CSP of lambda output on platform hosts: the page runs in an opaque origin (no cookie or
 * storage of the platform host is readable, its requests carry `Origin: null`) but scripts, forms
 * and popups still work, so a lambda can serve an interactive page.
 */
export const SANDBOX_CSP = 'sandbox allow-scripts allow-forms allow-popups';

/** Framing and hop-by-hop headers: the server frames the body and owns the connection. */
const HOP_BY_HOP = new Set([
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
]);
/**
 * Never from a lambda, whatever the host: `Clear-Site-Data: "cookies"` clears the cookies of the
 * whole registrable domain, the platform session included; X-Content-Type-Options is the platform's.
 */
const NEVER = new Set(['clear-site-data', 'x-content-type-options']);
/** Never from a lambda on a platform host: the platform's CSP, and HSTS, which would bind platform hosts. */
const NEVER_ON_PLATFORM = new Set(['content-security-policy', 'strict-transport-security']);

/**
 * Whether a request came in on a project's host: its Host is `<label>.<domain>` with one label that
 * is not a platform host name, and the gateway marked it with the project's id (X-Project-Id).
 * Everything else — platform hosts, the bare domain, IP literals, hosts outside the domain, a
 * missing Host — counts as a platform host, so a mistake sandboxes instead of trusting.
 */
export function isProjectHost(hostHeader: string | undefined, domain: string, projectId: string | null): boolean {
  if (projectId === null) return false;
  const host = hostName(hostHeader);
  const suffix = `.${domain.toLowerCase()}`;
  if (isIP(host) !== 0 || !host.endsWith(suffix)) return false;
  const label = host.slice(0, -suffix.length);
  return label !== '' && !label.includes('.') && !PLATFORM_HOST_LABELS.has(label);
}

/**
 * The headers a lambda's Response may send, given headers already checked for syntax by the
 * runtime: framing, hop-by-hop (`proxy-*` too) and `clear-site-data` dropped, platform cookies
 * dropped, and on platform hosts the lambda's own CSP, X-Content-Type-Options and HSTS dropped
 * (securityHeaders() sets the platform's).
 */
export function allowedHeaders(
  headers: readonly (readonly [string, string])[],
  platformHost: boolean,
): [string, string][] {
  const out: [string, string][] = [];
  for (const [rawName, value] of headers) {
    const name = rawName.toLowerCase();
    if (HOP_BY_HOP.has(name) || name.startsWith('proxy-') || NEVER.has(name)) continue;
    if (platformHost && NEVER_ON_PLATFORM.has(name)) continue;
    if (name === 'set-cookie' && isPlatformCookie(value)) continue;
    out.push([name, value]);
  }
  return out;
}

/** Headers every piece of lambda output carries: nosniff always, the sandbox CSP on platform hosts. */
export function securityHeaders(platformHost: boolean): Record<string, string> {
  return platformHost
    ? { 'x-content-type-options': 'nosniff', 'content-security-policy': SANDBOX_CSP }
    : { 'x-content-type-options': 'nosniff' };
}
