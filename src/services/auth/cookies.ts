import { isIP } from 'node:net';
import type { Settings } from '../../config.ts';
import { SESSION_LIFETIME_MS } from './repository.ts';

export const SESSION_COOKIE = 'stratus_session';

/** 604800: the session lifetime in seconds; the gateway re-issues the cookie when it slides the session. */
export const SESSION_COOKIE_MAX_AGE = Math.floor(SESSION_LIFETIME_MS / 1000);

export type CookieSettings = Pick<Settings, 'domain' | 'cookieSecure'>;

/** What a session token looks like (base64url); nothing else is written into or read from the cookie. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{1,512}$/;

/**
 * The platform domain when it has a dot and is not an IP address: the `Domain` that versions
 * before 0.2 gave the session cookie. The cookie is host-only now (see `cookie` below); this is
 * kept to clear such an old cookie at logout.
 */
export function cookieDomain(domain: string): string | null {
  const host = domain.trim().toLowerCase().replace(/\.$/, '');
  if (host === '' || !host.includes('.') || isIP(host.replace(/^\[|\]$/g, '')) !== 0) return null;
  return host;
}

/**
 * The session cookie is host-only (no `Domain`): it is set by `auth.<domain>` and returns only
 * there, never to the hosts that serve user code (project hosts, lambda, api, the bare domain;
 * SECURITY.md). The console signs in with a bearer token instead. `domain` adds the attribute,
 * only to clear an old domain-wide cookie.
 */
function cookie(value: string, maxAge: number, settings: CookieSettings, domain?: string): string {
  const parts = [`${SESSION_COOKIE}=${value}`, 'Path=/', 'HttpOnly'];
  if (settings.cookieSecure) parts.push('Secure');
  parts.push('SameSite=Lax', `Max-Age=${maxAge}`);
  if (domain) parts.push(`Domain=${domain}`);
  return parts.join('; ');
}

/**
 * `stratus_session=<token>; Path=/; HttpOnly; Secure; SameSite=Lax; Max-Age=604800` (README: The cookie),
 * without `Secure` when `cookieSecure` is false; host-only. Throws on a value that is not a token
 * (it would otherwise inject cookie attributes).
 */
export function sessionCookie(token: string, settings: CookieSettings): string {
  if (!TOKEN_PATTERN.test(token)) throw new Error('a session token is 1–512 base64url characters');
  return cookie(token, SESSION_COOKIE_MAX_AGE, settings);
}

/**
 * The same attributes with an empty value and `Max-Age=0`: the browser drops the cookie. With a
 * dotted domain a second header also drops a domain-wide cookie an older version may have set.
 */
export function clearSessionCookie(settings: CookieSettings): string | string[] {
  const domain = cookieDomain(settings.domain);
  return domain ? [cookie('', 0, settings), cookie('', 0, settings, domain)] : cookie('', 0, settings);
}

/**
 * The session token from a `Cookie` request header. Pairs are split on `;`, names and values
 * trimmed, a value in double quotes unquoted. The first `stratus_session` whose value looks like a
 * token wins; empty or malformed ones (which no session could match) are skipped. Null when none.
 */
export function readSessionCookie(cookieHeader: string | undefined): string | null {
  if (typeof cookieHeader !== 'string' || cookieHeader === '') return null;
  for (const pair of cookieHeader.split(';')) {
    const eq = pair.indexOf('=');
    if (eq < 0) continue;
    if (pair.slice(0, eq).trim() !== SESSION_COOKIE) continue;
    let value = pair.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    if (TOKEN_PATTERN.test(value)) return value;
  }
  return null;
}
