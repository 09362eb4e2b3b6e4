/**
 * The host name of a Host header: lower case, no port, no trailing dot, IPv6 literals without their
 * brackets; '' when there is none. The gateway routes by it (root README.md, Addressing) and lambda
 * output tells project hosts from platform hosts by it (lambda README: Output rules).
 */
export function hostName(hostHeader: string | undefined): string {
  if (!hostHeader) return '';
  const host = hostHeader.trim().toLowerCase();
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    return end > 0 ? host.slice(1, end) : host;
  }
  const colon = host.indexOf(':');
  return (colon >= 0 ? host.slice(0, colon) : host).replace(/\.$/, '');
}

/** Platform host names in the order the gateway lists them (root README.md, Addressing: its host table, in this order); the gateway routes them and lambda output treats every other label as a project's host. */
export const PLATFORM_HOSTS = [
  'api',
  'gateway',
  'auth',
  'apikeys',
  'lambda',
  'scheduler',
  'docdb',
  'logs',
  'files',
  'config',
  'run',
  'kv',
  'console',
] as const;

/**
 * `text` as a web origin, written as browsers send `Origin` (lower-case host, no default port):
 * `scheme://host[:port]`, http or https, with no path, query, fragment, credentials or wildcard;
 * null for anything else. What settings (`CORS_ORIGINS`, `SSO_REDIRECT_ORIGINS`) and a project's
 * `allowed_origins` accept.
 */
export function webOrigin(text: string): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  const bare = url.pathname === '/' && !text.includes('?') && !text.includes('#');
  const ok =
    bare &&
    (url.protocol === 'http:' || url.protocol === 'https:') &&
    url.username === '' &&
    url.password === '' &&
    !url.hostname.includes('*');
  return ok ? url.origin : null;
}

function firstHeader(value: string | string[] | undefined): string | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  return text?.split(',')[0]?.trim() || undefined;
}

/**
 * The scheme and port the caller used, as the gateway reports them (`X-Forwarded-Proto`,
 * `X-Forwarded-Host`) or the request shows (`Host`); the port is null when it is the scheme's
 * default. Services build the addresses they hand back (sign-in redirects, document servers) from
 * it; the host names themselves are always the platform's own, never the caller's.
 */
export function callerSchemeAndPort(headers: Readonly<Record<string, string | string[] | undefined>>): {
  scheme: 'http' | 'https';
  port: string | null;
} {
  const scheme = firstHeader(headers['x-forwarded-proto'])?.toLowerCase() === 'https' ? 'https' : 'http';
  const host = firstHeader(headers['x-forwarded-host']) ?? firstHeader(headers.host) ?? '';
  const port = /:(\d{1,5})$/.exec(host)?.[1] ?? null;
  const isDefault = port === null || (scheme === 'http' && port === '80') || (scheme === 'https' && port === '443');
  return { scheme, port: isDefault ? null : String(Number(port)) };
}
