import type { IncomingMessage, ServerResponse } from 'node:http';
import { SettingsError, type Settings } from '../config.ts';
import { PLATFORM_HOSTS } from './routing.ts';

/**
 * Platform hosts that serve user code: lambda output (`/run`, `/mux`, static lambdas) answers on
 * `lambda.<domain>`, `api.<domain>` and the bare domain. They are never trusted origins, and
 * neither is a project host (SECURITY.md, decision 45).
 */
export const USER_CODE_HOSTS: readonly string[] = ['api', 'lambda'];

const TRUSTED_LABELS = new Set<string>(PLATFORM_HOSTS.filter((label) => !USER_CODE_HOSTS.includes(label)));
const ALL_LABELS = new Set<string>(PLATFORM_HOSTS);

/** The host name of an http(s) origin, lower case; null for anything else (`null`, other schemes, junk). */
function originHost(origin: string): string | null {
  try {
    const url = new URL(origin);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
    return url.hostname.toLowerCase().replace(/\.$/, '');
  } catch {
    return null;
  }
}

/**
 * Whether an `Origin` (`scheme://host[:port]`) is a trusted platform origin: `<platform-host>.<domain>`
 * for a platform host that serves no user code (console, auth, docdb, …). The bare domain, `api.`,
 * `lambda.` and project hosts serve user-written pages, so they never count.
 */
export function isPlatformOrigin(origin: string, domain: string): boolean {
  const host = originHost(origin);
  if (host === null || !host.endsWith(`.${domain}`)) return false;
  return TRUSTED_LABELS.has(host.slice(0, -(domain.length + 1)));
}

/** The project slug of a project host's origin (`<slug>.<domain>`), or null. */
export function projectSlugOfOrigin(origin: string, domain: string): string | null {
  const host = originHost(origin);
  if (host === null || !host.endsWith(`.${domain}`)) return null;
  const label = host.slice(0, -(domain.length + 1));
  return label === '' || label.includes('.') || ALL_LABELS.has(label) ? null : label;
}

/**
 * `CORS_ORIGINS`, checked against the platform: an origin where the platform serves user code (the
 * bare domain, `api.`, `lambda.`, a project host, on the public port or the scheme's default
 * port, where a balancer puts it) must never ride on the session cookie, so it is a settings error.
 * Another port of such a host is another server (a development server on `localhost:5173`).
 */
export function credentialedOrigins(settings: Pick<Settings, 'domain' | 'corsOrigins' | 'port'>): readonly string[] {
  const domain = settings.domain;
  for (const origin of settings.corsOrigins) {
    const host = originHost(origin) ?? '';
    const onDomain = host === domain || host.endsWith(`.${domain}`);
    const port = new URL(origin).port;
    const platformPort = port === '' || port === String(settings.port);
    if (onDomain && platformPort && !isPlatformOrigin(origin, domain)) {
      throw new SettingsError(
        `CORS_ORIGINS: ${origin} serves user code on the platform domain (the bare domain, api., lambda. or a project host); it may never use the session cookie`,
      );
    }
  }
  return settings.corsOrigins;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * CSRF guard for cookie sessions (README: CSRF): a state-changing request whose `Origin` (or,
 * without one, `Referer`) is neither absent nor a platform host nor listed in `CORS_ORIGINS` must
 * not ride on the browser's session cookie. SameSite=Lax already stops other sites; this also
 * stops project hosts and the hosts that serve lambda output, which share the site and serve
 * anyone's code.
 */
export function cookieAllowed(req: IncomingMessage, domain: string, credentialed: readonly string[]): boolean {
  if (SAFE_METHODS.has(req.method ?? 'GET')) return true;
  const origin = req.headers.origin ?? req.headers.referer;
  if (origin === undefined) return true;
  if (origin === 'null') return false;
  return isPlatformOrigin(origin, domain) || credentialed.includes(originOf(origin));
}

/** `scheme://host[:port]` of an Origin or Referer value; '' when it is not a URL. */
function originOf(value: string): string {
  try {
    return new URL(value).origin;
  } catch {
    return '';
  }
}

/** What CORS grants an origin: reading answers with the session cookie, reading answers to requests without it, or nothing. */
export type CorsGrant = 'credentials' | 'plain' | null;

/** Where the grants come from: the domain, `CORS_ORIGINS`, and the projects (their hosts and listed origins). */
export interface CorsSources {
  domain: string;
  credentialed: readonly string[];
  projects: {
    bySlug(slug: string): Promise<{ id: string } | null>;
    originListed(origin: string): Promise<boolean>;
  };
}

/**
 * The grant for an `Origin` (root README.md, CORS; SECURITY.md): platform origins and
 * `CORS_ORIGINS` get credentials; a project host's own origin and an origin a project lists get
 * plain CORS (apps there send a key or bearer token in a header, never the cookie); anything else
 * nothing. Synchronous for platform and configured origins, which need no lookup.
 */
export function corsGrant(origin: string, sources: CorsSources): CorsGrant | Promise<CorsGrant> {
  if (isPlatformOrigin(origin, sources.domain) || sources.credentialed.includes(origin)) return 'credentials';
  if (originHost(origin) === null) return null;
  const slug = projectSlugOfOrigin(origin, sources.domain);
  if (slug !== null) return sources.projects.bySlug(slug).then((project) => (project ? 'plain' : null));
  return sources.projects.originListed(origin).then((listed) => (listed ? 'plain' : null));
}

/** Response headers a client may read across origins (the Fetch standard exposes only a few by default). */
const EXPOSED_HEADERS = [
  'X-Request-Id',
  'ETag',
  'Last-Modified',
  'Content-Range',
  'Content-Length',
  'Accept-Ranges',
  'Location',
  'Retry-After',
  'WWW-Authenticate',
  'X-Kv-Snapshot-Seq',
  'X-Kv-Resumed',
  'Docker-Content-Digest',
  'Docker-Upload-UUID',
  'Docker-Distribution-API-Version',
  'Range',
].join(', ');

/**
 * Applies a grant to the answer: `Access-Control-Allow-Origin` (and `-Credentials` for a
 * credentialed grant) with the headers clients need exposed; a preflight is answered here (204,
 * true) without reaching the service. Without a grant nothing is added and a preflight goes on to
 * the service, which may answer it itself (a lambda on a project host can).
 */
export function applyCors(req: IncomingMessage, res: ServerResponse, grant: CorsGrant): boolean {
  const origin = req.headers.origin;
  if (origin === undefined || grant === null) return false;
  res.setHeader('access-control-allow-origin', origin);
  if (grant === 'credentials') res.setHeader('access-control-allow-credentials', 'true');
  const preflightMethod = req.headers['access-control-request-method'];
  if (req.method === 'OPTIONS' && preflightMethod !== undefined) {
    res.setHeader('access-control-allow-methods', 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS');
    const requested = req.headers['access-control-request-headers'];
    if (requested) res.setHeader('access-control-allow-headers', requested);
    res.setHeader('access-control-max-age', '600');
    res.setHeader('vary', 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers');
    res.writeHead(204);
    res.end();
    return true;
  }
  res.setHeader('access-control-expose-headers', EXPOSED_HEADERS);
  return false;
}
