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
 * Which routes need authentication at the gateway (README: Route policy configuration): configured
 * rules first (first match wins), then the defaults — `/v0/secret`, the API-key and project
 * management paths, and every `kv.<domain>` path but its health checks are `require`; everything
 * else is `optional` and each backend enforces its own rules.
 */
export function createPolicy(rules: readonly RoutePolicyRule[]) {
  return (hostLabel: string, path: string): RoutePolicy => {
    for (const rule of rules) {
      if ((rule.host === '*' || rule.host === hostLabel) && underPrefix(path, rule.prefix)) return rule.auth;
    }
    switch (hostLabel) {
      case 'api':
      case 'gateway':
        if (underPrefix(path, '/v0/secret')) return 'require';
        if (hostLabel === 'api' && (underPrefix(path, '/v0/apikeys') || underPrefix(path, '/v0/projects')))
          return 'require';
        return 'optional';
      case 'apikeys':
        return underPrefix(path, '/v0/apikeys') || underPrefix(path, '/v0/projects') ? 'require' : 'optional';
      case 'kv':
        return KV_PUBLIC.some((p) => underPrefix(path, p)) ? 'optional' : 'require';
      default:
        return 'optional';
    }
  };
}
