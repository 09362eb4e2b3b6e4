// Platform cookies (`stratus_…`) are the platform's own: no user code (a lambda, a container)
// may set one (SECURITY.md: Lambda output and isolation).

/**
 * Whether a Set-Cookie value sets a platform cookie: a name starting with `stratus_`, also behind
 * the `__Host-` and `__Secure-` prefixes, compared without regard to case (as some clients do).
 * A value without `=` is a nameless cookie whose value browsers send as if it were a name.
 */
export function isPlatformCookie(setCookie: string): boolean {
  return isPlatformCookiePair(setCookie.split(';', 1)[0] ?? '');
}

/** The same for one `name=value` pair of a Cookie header. */
export function isPlatformCookiePair(pair: string): boolean {
  const eq = pair.indexOf('=');
  const name = (eq >= 0 ? pair.slice(0, eq) : pair).trim().toLowerCase();
  const bare = name.startsWith('__host-') ? name.slice(7) : name.startsWith('__secure-') ? name.slice(9) : name;
  return bare.startsWith('stratus_');
}
