import type { RoutePolicyRule } from '../config.ts';

export type RoutePolicy = 'require' | 'optional';

/** Paths of the key-value node that stay public (its health checks and API document). */
const KV_PUBLIC = ['/healthz', '/livez', '/startupz', '/readyz', '/openapi.json'];

/** True when `path` is `prefix` or continues it at a segment boundary. */
export function underPrefix(path: string, prefix: string): boolean {
  if (!path.startsWith(prefix)) return false;
  if (prefix.endsWith('/') || path.length === prefix.length) return true;
  const next = path.charCodeAt(prefix.length);
  return next === 47 /* / */ || next === 63; /* ? */
}

/**
 * The built-in rules, after the configured ones (README: Route policy configuration; first match
 * wins): `/v0/secret`, the API-key and project management paths, and every `kv.<domain>` path but
 * its health checks and API document are `require`; everything else is `optional`, and each
 * backend enforces its own rules. `GET /v0/routes` lists them.
 */
export const DEFAULT_POLICY_RULES: readonly RoutePolicyRule[] = [
  { host: 'api', prefix: '/v0/secret', auth: 'require' },
  { host: 'gateway', prefix: '/v0/secret', auth: 'require' },
  { host: 'api', prefix: '/v0/apikeys', auth: 'require' },
  { host: 'api', prefix: '/v0/projects', auth: 'require' },
  { host: 'apikeys', prefix: '/v0/apikeys', auth: 'require' },
  { host: 'apikeys', prefix: '/v0/projects', auth: 'require' },
  ...KV_PUBLIC.map((prefix): RoutePolicyRule => ({ host: 'kv', prefix, auth: 'optional' })),
  { host: 'kv', prefix: '/', auth: 'require' },
  { host: '*', prefix: '/', auth: 'optional' },
];

/** Which routes need authentication at the gateway: the configured rules, then DEFAULT_POLICY_RULES. */
export function createPolicy(rules: readonly RoutePolicyRule[]) {
  const all = [...rules, ...DEFAULT_POLICY_RULES];
  return (hostLabel: string, path: string): RoutePolicy => {
    for (const rule of all) {
      if ((rule.host === '*' || rule.host === hostLabel) && underPrefix(path, rule.prefix)) return rule.auth;
    }
    return 'optional';
  };
}
