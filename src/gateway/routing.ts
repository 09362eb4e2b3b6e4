import { isIP } from 'node:net';
import type { ServiceName } from '../config.ts';
import { hostName, PLATFORM_HOSTS } from '../core/host.ts';

export { PLATFORM_HOSTS } from '../core/host.ts';
export type PlatformHost = (typeof PLATFORM_HOSTS)[number];

/**
 * Where a request goes. `prefix` is set when the path came under the front door's
 * `/services/<name>` prefix: the gateway strips it before the service sees the path.
 */
export type RouteTarget =
  | { kind: 'service'; service: ServiceName; prefix?: string }
  | { kind: 'gateway'; prefix?: string }
  /** A project host `<slug>.<domain>`: the lambda service scoped to that project (if it exists). */
  | { kind: 'project'; slug: string }
  /** The host matches nothing: 404 `no_route`. */
  | { kind: 'no_route' }
  /** `api.<domain>` with a path that no prefix claims: 404 `not_found`. */
  | { kind: 'no_prefix' };

type ApiTarget = ServiceName | 'gateway';

/** Path prefixes of `api.<domain>` (root README.md, Addressing), longest first so the longest prefix wins. */
const API_PREFIXES: readonly (readonly [string, ApiTarget])[] = (
  [
    ['/v0/apikeys', 'apikeys'],
    ['/v0/projects', 'apikeys'],
    ['/api/v0', 'lambda'],
    ['/run/', 'lambda'],
    ['/mux/', 'lambda'],
    ['/ongoing', 'lambda'],
    ['/me', 'lambda'],
    ['/openapi', 'lambda'],
    ['/schedulers', 'scheduler'],
    ['/v0/configs', 'config'],
    ['/v1/config', 'config'],
    ['/v1/buckets', 'files'],
    ['/v1/loggers', 'logs'],
    ['/v1/ingest', 'logs'],
    ['/v1/databases', 'docdb'],
    ['/v1/debug', 'docdb'],
    ['/doc', 'docdb'],
    ['/release', 'docdb'],
    ['/v1', 'docdb'],
    ['/version', 'gateway'],
    ['/v0/', 'gateway'],
    ['/openapi.json', 'gateway'],
    ['/v2/', 'run'],
  ] as const
)
  .slice()
  .sort((a, b) => b[0].length - a[0].length);

/** The path prefixes of `api.<domain>` and their services, longest first (`GET /v0/routes`). */
export function apiPrefixes(): readonly { prefix: string; service: ApiTarget }[] {
  return API_PREFIXES.map(([prefix, service]) => ({ prefix, service }));
}

/**
 * The service a path on `api.<domain>` belongs to. A prefix matches at a segment boundary
 * (`/me` matches `/me` and `/me/x`, not `/messages`); prefixes ending in `/` match what follows.
 */
export function routeApiPath(path: string): ApiTarget | null {
  for (const [prefix, target] of API_PREFIXES) {
    if (!path.startsWith(prefix)) continue;
    const next = path.charAt(prefix.length);
    if (prefix.endsWith('/') || next === '' || next === '/' || next === '?' || next === '.' || next === ':')
      return target;
  }
  return null;
}

const SERVICE_HOSTS = new Set<string>(PLATFORM_HOSTS.filter((h) => h !== 'api' && h !== 'gateway'));

/** The front door's path prefix for every service (decision 47; root README.md, One base URL). */
export const SERVICES_PREFIX = '/services/';

/**
 * `/services/<name>[/…]` on the front door: the service (or the gateway) `<name>`'s own host, with
 * `/services/<name>` as the prefix to strip. Null when the path is not under the prefix or names
 * no platform host (`/services/api/…` included: `api` is the front door itself).
 */
export function routeServicesPath(
  path: string,
): Exclude<RouteTarget, { kind: 'no_route' | 'no_prefix' | 'project' }> | null {
  if (!path.startsWith(SERVICES_PREFIX)) return null;
  const slash = path.indexOf('/', SERVICES_PREFIX.length);
  const name = path.slice(SERVICES_PREFIX.length, slash < 0 ? undefined : slash);
  const prefix = SERVICES_PREFIX + name;
  if (name === 'gateway') return { kind: 'gateway', prefix };
  if (SERVICE_HOSTS.has(name)) return { kind: 'service', service: name as ServiceName, prefix };
  return null;
}

/** A container host's label before `.run`: one DNS label. */
const CONTAINER_SLUG = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;

/** Resolves Host + path to a target (root README.md, Addressing). Project slugs are checked by the caller. */
export function resolveRoute(hostHeader: string | undefined, path: string, domain: string): RouteTarget {
  const host = hostName(hostHeader);
  let label: string | null = null;
  if (host.endsWith(`.${domain}`)) label = host.slice(0, -(domain.length + 1));
  else if (host === domain || isIP(host) !== 0) label = 'api';
  if (label === null || label === '') return { kind: 'no_route' };
  // `<slug>.run.<domain>`: a running container, served through the run service (its README: Traffic).
  if (label.endsWith('.run') && CONTAINER_SLUG.test(label.slice(0, -4))) return { kind: 'service', service: 'run' };
  if (label.includes('.')) return { kind: 'no_route' };

  if (label === 'api') {
    if (path.startsWith(SERVICES_PREFIX)) return routeServicesPath(path) ?? { kind: 'no_prefix' };
    const target = routeApiPath(path);
    if (target === null) return { kind: 'no_prefix' };
    return target === 'gateway' ? { kind: 'gateway' } : { kind: 'service', service: target };
  }
  if (label === 'gateway') return { kind: 'gateway' };
  if (SERVICE_HOSTS.has(label)) return { kind: 'service', service: label as ServiceName };
  return { kind: 'project', slug: label };
}
