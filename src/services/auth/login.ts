import type { Settings } from '../../config.ts';
import type { SqlConnection } from '../../store/db.ts';
import { sessionCookie } from './cookies.ts';
import { createSession, type User } from './repository.ts';
import type { LoginResponse } from './schemas.ts';

/** `{"user":{id,nick?,email},"token":"…"}`; a nick the platform does not know is left out. */
export function loginResponse(user: Pick<User, 'id' | 'email' | 'nick'>, token: string): LoginResponse {
  return { user: { id: user.id, ...(user.nick !== undefined && { nick: user.nick }), email: user.email }, token };
}

/** The part of a Fastify reply this module needs. */
export interface HeaderSink {
  header(name: string, value: string): unknown;
}

/** The part of a Fastify request this module needs. */
export interface HeaderSource {
  headers: Record<string, string | string[] | undefined>;
}

/**
 * Creates a session for the user, sets `Set-Cookie` (and `Cache-Control: no-store`, since the
 * body carries the token) on the reply and returns the login-style body. For login, signup and
 * single sign-on alike. Reached through the front door's `/services/auth` (the gateway says so in
 * `X-Forwarded-Prefix`), no cookie is set: the front door serves user code, and the cookie lives
 * only on `auth.<domain>` (SECURITY.md, Origins); clients there use the token as a bearer.
 */
export async function startSession(
  request: HeaderSource,
  reply: HeaderSink,
  connection: SqlConnection,
  user: Pick<User, 'id' | 'email' | 'nick'>,
  settings: Pick<Settings, 'domain' | 'cookieSecure'>,
): Promise<LoginResponse> {
  const { token } = await createSession(connection, user.id);
  if (request.headers['x-forwarded-prefix'] === undefined) reply.header('set-cookie', sessionCookie(token, settings));
  reply.header('cache-control', 'no-store');
  return loginResponse(user, token);
}
