import { Type, type Static } from 'typebox';
import type { Settings } from '../../config.ts';
import type { SqlConnection } from '../../store/db.ts';
import { sessionCookie } from './cookies.ts';
import { createSession, type User } from './repository.ts';

/** The shape login, signup and the SSO token exchange answer with (gateway.md §5). */
export const loginResponseSchema = Type.Object(
  {
    user: Type.Object(
      {
        id: Type.String({ description: 'user-<uuid v4>' }),
        nick: Type.Optional(Type.String()),
        email: Type.String(),
      },
      { additionalProperties: false },
    ),
    token: Type.String({ description: 'Session token: the stratus_session cookie value, also usable as Authorization: Bearer <token>' }),
  },
  { additionalProperties: false, description: 'The user and a new session token' },
);

export type LoginResponse = Static<typeof loginResponseSchema>;

/** `{"user":{id,nick?,email},"token":"…"}`; a nick the platform does not know is left out. */
export function loginResponse(user: Pick<User, 'id' | 'email' | 'nick'>, token: string): LoginResponse {
  return { user: { id: user.id, ...(user.nick !== undefined && { nick: user.nick }), email: user.email }, token };
}

/** The part of a Fastify reply this module needs. */
export interface HeaderSink {
  header(name: string, value: string): unknown;
}

/**
 * Creates a session for the user, sets `Set-Cookie` (and `Cache-Control: no-store`, since the
 * body carries the token) on the reply and returns the login-style body. For login, signup and
 * single sign-on alike.
 */
export async function startSession(
  reply: HeaderSink,
  connection: SqlConnection,
  user: Pick<User, 'id' | 'email' | 'nick'>,
  settings: Pick<Settings, 'domain' | 'cookieSecure'>,
): Promise<LoginResponse> {
  const { token } = await createSession(connection, user.id);
  reply.header('set-cookie', sessionCookie(token, settings));
  reply.header('cache-control', 'no-store');
  return loginResponse(user, token);
}
