// Signing in and out: password login, single sign-on through the auth service, the current user.
import { ApiError, baseUrl, call, config, errorOf, json, setToken, token } from './api.ts';

export interface User {
  id: string;
  email?: string;
  nick?: string;
  picture?: string;
  created_at?: string;
}

interface LoginAnswer {
  user: User;
  token: string;
}

export async function login(email: string, password: string): Promise<User> {
  const answer = await json<LoginAnswer>('auth', '/v0/login', { method: 'POST', body: { email, password } });
  if (!answer || typeof answer.token !== 'string') throw new ApiError(500, 'bad_answer', 'The sign-in answer carried no session token.');
  setToken(answer.token);
  return answer.user;
}

/** Creates an account (only when sign-up is open) and signs in with it. */
export async function signup(email: string, password: string, nick: string): Promise<User> {
  const answer = await json<LoginAnswer>('auth', '/v0/signup', { method: 'POST', body: nick === '' ? { email, password } : { email, password, nick } });
  if (!answer || typeof answer.token !== 'string') throw new ApiError(500, 'bad_answer', 'The sign-up answer carried no session token.');
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
    if (token()) await call('auth', '/v0/logout', { method: 'POST' });
  } finally {
    setToken(null);
    await call('auth', '/v0/logout', { method: 'POST', bearer: false }).catch(() => undefined);
  }
}

/** The signed-in user, or null when there is no usable session. */
export async function me(): Promise<User | null> {
  if (!config().demo && !token()) return null;
  try {
    return await json<User>('auth', '/v0/me');
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      setToken(null);
      return null;
    }
    throw err;
  }
}

/** Where an SSO button sends the browser: back to this console when signed in. */
export function ssoLoginUrl(provider: string): string {
  const redirect = encodeURIComponent(location.origin + '/');
  return `${baseUrl('auth')}/v0/sso/${encodeURIComponent(provider)}/login?redirect=${redirect}`;
}

/**
 * Back from an identity provider with `?sso_code=…`: trades that one-time code for a bearer
 * session (the sign-on's cookie lives on auth.<domain> and may not reach the other hosts) and
 * removes it from the address bar. Returns true when a token was stored.
 */
export async function finishSso(): Promise<boolean> {
  const params = new URLSearchParams(location.search);
  const code = params.get('sso_code');
  if (code === null) return false;
  params.delete('sso_code');
  const rest = params.toString();
  history.replaceState(null, '', location.pathname + (rest ? `?${rest}` : '') + location.hash);
  const res = await fetch(`${baseUrl('auth')}/v0/session/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code }) });
  if (!res.ok) throw await errorOf(res);
  const body = (await res.json()) as { token?: unknown };
  if (typeof body.token !== 'string') throw new ApiError(500, 'bad_answer', 'The single sign-on answer carried no session token.');
  setToken(body.token);
  return true;
}
