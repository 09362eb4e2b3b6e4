import type { IncomingMessage, ServerResponse } from 'node:http';
import { PLATFORM_HOSTS } from './routing.ts';

/**
 * Platform hosts that serve user code: lambda output (`/run`, `/mux`, static lambdas) answers on
 * `lambda.<domain>`, `api.<domain>` and the bare domain. They are never trusted origins, and
 * neither is a project host (SECURITY.md, decision 45).
 */
export const USER_CODE_HOSTS: readonly string[] = ['api', 'lambda'];

const TRUSTED_LABELS = new Set<string>(PLATFORM_HOSTS.filter((label) => !USER_CODE_HOSTS.includes(label)));

/**
 * Whether an `Origin` (`scheme://host[:port]`) is a trusted platform origin: `<platform-host>.<domain>`
 * for a platform host that serves no user code (console, auth, docdb, …). The bare domain, `api.`,
 * `lambda.` and project hosts serve user-written pages, so they never count.
 */
export function isPlatformOrigin(origin: string, domain: string): boolean {
  let host: string;
  try {
    const url = new URL(origin);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
    host = url.hostname.toLowerCase();
  } catch {
    return false;
  }
  if (!host.endsWith(`.${domain}`)) return false;
  return TRUSTED_LABELS.has(host.slice(0, -(domain.length + 1)));
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * CSRF guard for cookie sessions (README: CSRF): a state-changing request whose `Origin` (or,
 * without one, `Referer`) is neither absent nor a platform host must not ride on the browser's
 * session cookie. SameSite=Lax already stops other sites; this also stops project hosts and the
 * hosts that serve lambda output, which share the site and serve anyone's code.
 */
export function cookieAllowed(req: IncomingMessage, domain: string): boolean {
  if (SAFE_METHODS.has(req.method ?? 'GET')) return true;
  const origin = req.headers.origin ?? req.headers.referer;
  if (origin === undefined) return true;
  return origin !== 'null' && isPlatformOrigin(origin, domain);
}

/**
 * CORS for the console and other platform pages calling platform APIs with credentials: a
 * preflight from a platform origin is answered here (true = answered); an actual request from one
 * gets the allow headers. Other origins get nothing from the gateway (a service may add its own).
 */
export function applyCors(req: IncomingMessage, res: ServerResponse, domain: string): boolean {
  const origin = req.headers.origin;
  if (origin === undefined || !isPlatformOrigin(origin, domain)) return false;
  res.setHeader('access-control-allow-origin', origin);
  res.setHeader('access-control-allow-credentials', 'true');
  res.setHeader('vary', 'Origin');
  const preflightMethod = req.headers['access-control-request-method'];
  if (req.method === 'OPTIONS' && preflightMethod !== undefined) {
    res.setHeader('access-control-allow-methods', 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS');
    const requested = req.headers['access-control-request-headers'];
    if (requested) res.setHeader('access-control-allow-headers', requested);
    res.setHeader('access-control-max-age', '600');
    res.writeHead(204);
    res.end();
    return true;
  }
  res.setHeader('access-control-expose-headers', 'X-Request-Id');
  return false;
}
