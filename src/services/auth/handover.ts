/**
 * The single sign-on hand-over: where a sign-in may send the browser with its one-time `sso_code`,
 * and how that code is bound to the page that started the sign-in (README, "The hand-over code").
 *
 * - Redirect targets: the console's own origin (`<scheme>://console.<domain>[:port]`, as the browser
 *   reached the platform) and the exact origins of `settings.ssoRedirectOrigins`. Every other host
 *   on the domain serves user code (project hosts, `lambda.`, `api.`, the bare domain) or no pages.
 * - Binding (PKCE-style, RFC 7636 S256): the page sends `code_challenge` = BASE64URL(SHA-256(verifier))
 *   to `/login` and keeps the verifier; the exchange must present `code_verifier`. A code that
 *   leaks from the address bar, history or a log is useless without the verifier.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { SettingsError, type Settings } from '../../config.ts';
import { AuthErrors } from './errors.ts';

/** Longest redirect target accepted (characters). */
export const REDIRECT_MAX_LENGTH = 2048;

/** An S256 challenge: 32 bytes of SHA-256 as unpadded base64url. */
export const CODE_CHALLENGE_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** A verifier as RFC 7636 (section 4.1) defines it: 43–128 unreserved characters (README: The hand-over code). */
export const CODE_VERIFIER_PATTERN = /^[A-Za-z0-9._~-]{43,128}$/;

/** BASE64URL(SHA-256(verifier)), the S256 challenge of a verifier. */
export function challengeOf(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

/** Whether `verifier` is the one `challenge` was made from (constant-time on the digests). */
export function verifierMatches(verifier: string, challenge: string): boolean {
  if (!CODE_VERIFIER_PATTERN.test(verifier) || !CODE_CHALLENGE_PATTERN.test(challenge)) return false;
  const expected = Buffer.from(challenge, 'base64url');
  const actual = createHash('sha256').update(verifier, 'ascii').digest();
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/**
 * The allow-listed origins, checked against the platform domain: an origin on the domain other
 * than `console.<domain>` would hand sign-in codes to user code (project hosts, `lambda.`, `api.`,
 * the bare domain) or to a host that serves no pages, so it is a settings error.
 */
export function allowedRedirectOrigins(settings: Pick<Settings, 'domain' | 'ssoRedirectOrigins'>): readonly string[] {
  const domain = settings.domain;
  const origins = settings.ssoRedirectOrigins ?? [];
  for (const origin of origins) {
    const host = new URL(origin).hostname.toLowerCase().replace(/\.$/, '');
    if ((host === domain || host.endsWith(`.${domain}`)) && host !== `console.${domain}`) {
      throw new SettingsError(
        `SSO_REDIRECT_ORIGINS: ${origin} is on the platform domain; only console.${domain} may receive single sign-on codes there (the other hosts serve user code or no pages)`,
      );
    }
  }
  return origins;
}

/**
 * The absolute URL to send the browser to after signing in. A path (one leading `/`) is taken on
 * the console, since `auth.<domain>` serves no pages; an absolute URL must be http(s) without
 * credentials and its origin must be exactly the console's or one of `allowed`. Anything else is
 * a 400 `validation_error`.
 */
export function redirectTarget(raw: string | undefined, consoleOrigin: string, allowed: readonly string[]): string {
  if (raw === undefined || raw === '') return `${consoleOrigin}/`;
  const invalid = () => AuthErrors.redirectNotAllowed(consoleOrigin, allowed);
  // Backslashes and control characters make browsers and URL parsers disagree (`/\evil.example`).
  if (raw.length > REDIRECT_MAX_LENGTH || /[\\\p{Cc}]/u.test(raw)) throw invalid();
  if (raw.startsWith('/')) {
    if (raw.startsWith('//')) throw invalid();
    const url = new URL(raw, consoleOrigin);
    if (url.origin !== consoleOrigin) throw invalid();
    return url.href;
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid();
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid();
  if (url.username !== '' || url.password !== '') throw invalid();
  if (url.origin !== consoleOrigin && !allowed.includes(url.origin)) throw invalid();
  return url.href;
}
