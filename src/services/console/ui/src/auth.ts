// Signing in and out: password login, single sign-on through the auth service, the current user.
import { StratusError } from '@stratus/client';
import { config, onFrontDoor, platform, servicePageUrl, setToken, token } from './session.ts';

export interface User {
  id: string;
  email?: string;
  nick?: string;
  picture?: string;
  created_at?: string;
}

export async function login(email: string, password: string): Promise<User> {
  const answer = await platform().auth.login(email, password);
  setToken(answer.token);
  return answer.user;
}

/** Creates an account (only when sign-up is open) and signs in with it. */
export async function signup(email: string, password: string, nick: string): Promise<User> {
  const answer = await platform().auth.signup(email, password, nick);
  setToken(answer.token);
  return answer.user;
}

/**
 * Ends the console's bearer session, then any cookie session of the same browser (after single
 * sign-on on a dotted domain the SSO cookie reaches every platform host), and forgets the token.
 */
export async function logout(): Promise<void> {
  if (config().demo) return;
  try {
    if (token()) await platform().auth.logout();
  } finally {
    setToken(null);
    // The cookie is host-only on auth.<domain> (SECURITY.md, Origins), so this call goes there,
    // not to the front door the client calls; it carries the cookie and no token.
    await fetch(servicePageUrl('auth', '/v0/logout'), { method: 'POST', credentials: 'include' }).catch(
      () => undefined,
    );
  }
}

/** The signed-in user, or null when there is no usable session. */
export async function me(): Promise<User | null> {
  if (!config().demo && !token()) return null;
  try {
    return await platform().auth.me();
  } catch (err) {
    if (err instanceof StratusError && err.status === 401) {
      setToken(null);
      return null;
    }
    throw err;
  }
}

// Single sign-on hands the console its session through a one-time `sso_code` in the redirect. The
// code is bound to this browser PKCE-style (RFC 7636, S256): the console keeps a random verifier and
// sends only its SHA-256 (`code_challenge`) to /login; the exchange must present the verifier, so a
// code that leaks from the address bar, the history or a log is worth nothing elsewhere. The
// verifier lives in localStorage, so a sign-in opened in another tab of this console works too.
const SSO_VERIFIER_KEY = 'stratus.console.sso_verifier';
const VERIFIER_PATTERN = /^[A-Za-z0-9_-]{43}$/;

function base64url(bytes: Uint8Array): string {
  let text = '';
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

// SHA-256 (FIPS 180-4) of a byte string, synchronously: the sign-in links are rendered
// synchronously, and crypto.subtle is missing on plain-HTTP origins other than localhost.
const K = Uint32Array.from([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);

function sha256(message: Uint8Array): Uint8Array {
  const blocks = new Uint8Array((((message.length + 8) >> 6) + 1) << 6);
  blocks.set(message);
  blocks[message.length] = 0x80;
  const data = new DataView(blocks.buffer);
  data.setUint32(blocks.length - 8, Math.floor(message.length / 0x20000000));
  data.setUint32(blocks.length - 4, (message.length << 3) >>> 0);
  const h = Uint32Array.from([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  ]);
  const w = new Uint32Array(64);
  const rotr = (x: number, n: number) => (x >>> n) | (x << (32 - n));
  for (let offset = 0; offset < blocks.length; offset += 64) {
    for (let i = 0; i < 16; i++) w[i] = data.getUint32(offset + 4 * i);
    for (let i = 16; i < 64; i++) {
      const a = w[i - 15]!;
      const b = w[i - 2]!;
      w[i] = w[i - 16]! + (rotr(a, 7) ^ rotr(a, 18) ^ (a >>> 3)) + w[i - 7]! + (rotr(b, 17) ^ rotr(b, 19) ^ (b >>> 10));
    }
    let [a, b, c, d, e, f, g, k] = h as unknown as [number, number, number, number, number, number, number, number];
    for (let i = 0; i < 64; i++) {
      const t1 = (k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i]! + w[i]!) | 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      k = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    [a, b, c, d, e, f, g, k].forEach((value, i) => (h[i] = h[i]! + value));
  }
  const out = new Uint8Array(32);
  const view = new DataView(out.buffer);
  h.forEach((value, i) => view.setUint32(4 * i, value));
  return out;
}

/** This browser's pending sign-in verifier (32 random bytes, base64url), made on first use. */
function ssoVerifier(): string {
  const stored = localStorage.getItem(SSO_VERIFIER_KEY);
  if (stored !== null && VERIFIER_PATTERN.test(stored)) return stored;
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  localStorage.setItem(SSO_VERIFIER_KEY, verifier);
  return verifier;
}

/** BASE64URL(SHA-256(verifier)): what /login stores to bind the code (RFC 7636 S256). */
function codeChallenge(verifier: string): string {
  return base64url(sha256(new TextEncoder().encode(verifier)));
}

/** Where an SSO button sends the browser: back to this console, with the challenge that binds the hand-over code to it. */
export function ssoLoginUrl(provider: string): string {
  const query = new URLSearchParams({
    code_challenge: codeChallenge(ssoVerifier()),
    code_challenge_method: 'S256',
  });
  // Sign-in codes go only to the console's own host (auth README): loaded from the front door, the
  // sign-in ends there, the auth service's default target.
  if (!onFrontDoor) query.set('redirect', location.origin + '/');
  return servicePageUrl('auth', `/v0/sso/${encodeURIComponent(provider)}/login?${query.toString()}`);
}

/**
 * Back from an identity provider with `?sso_code=…`: removes the code from the address bar and
 * trades it, with this browser's verifier, for a bearer session (the sign-on's cookie stays on
 * auth.<domain>). A code this console did not ask for (no verifier here: someone else started
 * the sign-in) is still sent, without a verifier, so that the auth service burns it. Returns true
 * when a token was stored.
 */
export async function finishSso(): Promise<boolean> {
  const params = new URLSearchParams(location.search);
  const code = params.get('sso_code');
  if (code === null) return false;
  params.delete('sso_code');
  const rest = params.toString();
  history.replaceState(null, '', location.pathname + (rest ? `?${rest}` : '') + location.hash);
  const verifier = localStorage.getItem(SSO_VERIFIER_KEY);
  // One verifier per sign-in: the next sign-in gets a fresh one.
  localStorage.removeItem(SSO_VERIFIER_KEY);
  // The code is the credential: the call carries no session (there is none yet).
  const answer = await platform().auth.exchangeCode(
    code,
    verifier !== null && VERIFIER_PATTERN.test(verifier) ? verifier : undefined,
  );
  setToken(answer.token);
  return true;
}
