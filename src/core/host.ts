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
