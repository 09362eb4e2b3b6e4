import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { newId, rfc3339 } from '../../core/ids.ts';
import type { SqlConnection } from '../../store/db.ts';
import { first, run, type Work } from '../../store/sql-work.ts';
import { hashPassword, normaliseEmail } from './credentials.ts';
import { AuthErrors } from './errors.ts';

// Every function reaches storage through the SQL port (`connection.database`): reads with `read`,
// changes with `write`, each write one transaction that is answered only once it has committed.

/** The user record (README: `GET /v0/me`); members the platform does not know are absent. */
export interface User {
  id: string;
  email: string;
  nick?: string;
  picture?: string;
  created_at: string;
}

/** A server-side session; times are Unix milliseconds. The token itself is never stored. */
export interface Session {
  id: string;
  userId: string;
  createdAt: number;
  expiresAt: number;
  lastSeenAt: number;
}

/** 7 days, sliding (README: Sessions). */
export const SESSION_LIFETIME_MS = 7 * 24 * 3600 * 1000;

/** Longer values are not tokens this service issued (a token is 43 characters); they are not looked up. */
const MAX_TOKEN_LENGTH = 512;

/** SHA-256 hex: how session tokens and SSO states are stored and looked up. */
export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

type UserRow = { id: string; email: string; nick: string | null; picture: string | null; created_at: string };

const USER_COLUMNS = 'id, email, nick, picture, created_at';

/** Key order as documented (id, email, nick, picture, created_at); unknown members left out. */
function toUser(row: UserRow): User {
  return {
    id: row.id,
    email: row.email,
    ...(row.nick !== null && { nick: row.nick }),
    ...(row.picture !== null && { picture: row.picture }),
    created_at: row.created_at,
  };
}

type SessionRow = { id: string; user_id: string; created_at: number; expires_at: number; last_seen_at: number };

const SESSION_COLUMNS = 'id, user_id, created_at, expires_at, last_seen_at';

function toSession(row: SessionRow): Session {
  return {
    id: row.id,
    userId: row.user_id,
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
    lastSeenAt: Number(row.last_seen_at),
  };
}

/** True when `error` is the UNIQUE constraint on the user email refusing a row (SQLite or PostgreSQL). */
function isEmailConflict(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, constraint, message } = error as { code?: unknown; constraint?: unknown; message?: unknown };
  if (code === '23505') return constraint === 'auth_users_email_unique';
  return code === 'SQLITE_CONSTRAINT_UNIQUE' && typeof message === 'string' && message.includes('auth_users.email');
}

// ---------------------------------------------------------------------------------------------
// Users

/** Thrown inside a write to undo it when the identity it links belongs to another user. */
class IdentityTaken extends Error {}

/**
 * Creates a user. The email is stored normalised; a password is stored only as a bcrypt hash
 * (cost 10), and a user created without one (single sign-on) cannot log in with a password.
 * Throws HttpError 409 `conflict` when a user already has that email.
 *
 * With `identity`, the (provider, subject) pair is linked to the new user in the same transaction,
 * so a concurrent sign-in of that identity whose own create is refused finds the user through the
 * link at once. When the pair is already linked to another user nothing is stored and it is a 409
 * `conflict` too, as `linkIdentity` answers.
 */
export async function createUser(
  connection: SqlConnection,
  input: { email: string; password?: string; nick?: string; picture?: string },
  identity?: { provider: string; subject: string },
): Promise<User> {
  const email = normaliseEmail(input.email);
  const passwordHash = input.password === undefined ? null : await hashPassword(input.password);
  const row: UserRow = {
    id: newId('user'),
    email,
    nick: input.nick ?? null,
    picture: input.picture ?? null,
    created_at: rfc3339(),
  };
  try {
    await connection.database.write(function* () {
      yield* run(
        'insert into auth_users (id, email, nick, picture, password_hash, created_at) values (?, ?, ?, ?, ?, ?)',
        row.id,
        row.email,
        row.nick,
        row.picture,
        passwordHash,
        row.created_at,
      );
      if (identity && (yield* linkWork(identity.provider, identity.subject, row.id, row.created_at)) !== row.id)
        throw new IdentityTaken();
    });
  } catch (error) {
    if (isEmailConflict(error)) throw AuthErrors.emailTaken(email);
    if (error instanceof IdentityTaken) throw AuthErrors.identityLinkedElsewhere(identity!.provider);
    throw error;
  }
  return toUser(row);
}

export async function findUserById(connection: SqlConnection, id: string): Promise<User | null> {
  const row = await connection.database.read(() =>
    first<UserRow>(`select ${USER_COLUMNS} from auth_users where id = ?`, id),
  );
  return row ? toUser(row) : null;
}

/** The user with this email (normalised before the lookup) and its password hash (null for SSO-only users). */
export async function findUserByEmail(
  connection: SqlConnection,
  email: string,
): Promise<(User & { passwordHash: string | null }) | null> {
  const key = normaliseEmail(email);
  const row = await connection.database.read(() =>
    first<UserRow & { password_hash: string | null }>(
      `select ${USER_COLUMNS}, password_hash from auth_users where email = ?`,
      key,
    ),
  );
  return row ? { ...toUser(row), passwordHash: row.password_hash } : null;
}

/** Sets the given profile fields; fields left undefined keep their value. */
export async function updateUserProfile(
  connection: SqlConnection,
  userId: string,
  fields: { nick?: string; picture?: string },
): Promise<void> {
  const columns: string[] = [];
  const values: string[] = [];
  if (fields.nick !== undefined) {
    columns.push('nick = ?');
    values.push(fields.nick);
  }
  if (fields.picture !== undefined) {
    columns.push('picture = ?');
    values.push(fields.picture);
  }
  if (columns.length === 0) return;
  await connection.database.write(() =>
    run(`update auth_users set ${columns.join(', ')} where id = ?`, ...values, userId),
  );
}

// ---------------------------------------------------------------------------------------------
// Single sign-on identities

export async function findUserByIdentity(
  connection: SqlConnection,
  provider: string,
  subject: string,
): Promise<User | null> {
  const row = await connection.database.read(() =>
    first<UserRow>(
      `select u.id, u.email, u.nick, u.picture, u.created_at
        from auth_identities i join auth_users u on u.id = i.user_id
        where i.provider = ? and i.subject = ?`,
      provider,
      subject,
    ),
  );
  return row ? toUser(row) : null;
}

/**
 * Links (provider, subject) to the user. Linking the same pair to the same user again is a no-op;
 * a pair already linked to another user is a 409 `conflict` (a subject is one person).
 */
export async function linkIdentity(
  connection: SqlConnection,
  provider: string,
  subject: string,
  userId: string,
): Promise<void> {
  const createdAt = rfc3339();
  const linked = await connection.database.write(() => linkWork(provider, subject, userId, createdAt));
  if (linked !== undefined && linked !== userId) throw AuthErrors.identityLinkedElsewhere(provider);
}

/** The pair is inserted unless it exists; then the user it belongs to is read back. */
function* linkWork(provider: string, subject: string, userId: string, createdAt: string): Work<string | undefined> {
  yield* run(
    'insert into auth_identities (provider, subject, user_id, created_at) values (?, ?, ?, ?) on conflict (provider, subject) do nothing',
    provider,
    subject,
    userId,
    createdAt,
  );
  const row = yield* first<{ user_id: string }>(
    'select user_id from auth_identities where provider = ? and subject = ?',
    provider,
    subject,
  );
  return row?.user_id;
}

// ---------------------------------------------------------------------------------------------
// Sessions

/**
 * Starts a session for the user. The token (32 random bytes, base64url) is returned once and
 * only its SHA-256 is stored; the session's public id is a UUID v4.
 */
export async function createSession(
  connection: SqlConnection,
  userId: string,
  now: number = Date.now(),
): Promise<{ token: string; session: Session }> {
  const token = randomBytes(32).toString('base64url');
  const row: SessionRow & { token_hash: string } = {
    id: randomUUID(),
    token_hash: sha256Hex(token),
    user_id: userId,
    created_at: now,
    expires_at: now + SESSION_LIFETIME_MS,
    last_seen_at: now,
  };
  await connection.database.write(() =>
    run(
      'insert into auth_sessions (id, token_hash, user_id, created_at, expires_at, last_seen_at) values (?, ?, ?, ?, ?, ?)',
      row.id,
      row.token_hash,
      row.user_id,
      row.created_at,
      row.expires_at,
      row.last_seen_at,
    ),
  );
  return { token, session: toSession(row) };
}

type SessionUserRow = SessionRow & {
  email: string;
  nick: string | null;
  picture: string | null;
  user_created_at: string;
};

const SESSION_BY_TOKEN_SQL = `select s.id, s.user_id, s.created_at, s.expires_at, s.last_seen_at,
  u.email, u.nick, u.picture, u.created_at as user_created_at
  from auth_sessions s join auth_users u on u.id = s.user_id
  where s.token_hash = ? and s.expires_at > ?`;

/**
 * The live session a token stands for, with its user; null when the token is unknown or the
 * session has expired. It is the gateway's per-request path: one keyed read, which the port runs
 * synchronously on SQLite when the connection is free.
 */
export async function findSessionByToken(
  connection: SqlConnection,
  token: string,
  now: number = Date.now(),
): Promise<{ session: Session; user: User } | null> {
  if (token.length === 0 || token.length > MAX_TOKEN_LENGTH) return null;
  const tokenHash = sha256Hex(token);
  const row = await connection.database.read(() => first<SessionUserRow>(SESSION_BY_TOKEN_SQL, tokenHash, now));
  if (!row) return null;
  return {
    session: toSession(row),
    user: toUser({
      id: row.user_id,
      email: row.email,
      nick: row.nick,
      picture: row.picture,
      created_at: row.user_created_at,
    }),
  };
}

/**
 * Sliding expiry: a live session now expires SESSION_LIFETIME_MS after `now` and was last seen
 * at `now`. Null when the session is unknown or already expired (an expired session stays dead).
 */
export async function extendSession(
  connection: SqlConnection,
  sessionId: string,
  now: number = Date.now(),
): Promise<Session | null> {
  const row = await connection.database.write(() =>
    first<SessionRow>(
      `update auth_sessions set expires_at = ?, last_seen_at = ? where id = ? and expires_at > ? returning ${SESSION_COLUMNS}`,
      now + SESSION_LIFETIME_MS,
      now,
      sessionId,
      now,
    ),
  );
  return row ? toSession(row) : null;
}

/** The live session with this public id; null when it is unknown, deleted or expired. */
export async function findSessionById(
  connection: SqlConnection,
  sessionId: string,
  now: number = Date.now(),
): Promise<Session | null> {
  const row = await connection.database.read(() =>
    first<SessionRow>(`select ${SESSION_COLUMNS} from auth_sessions where id = ? and expires_at > ?`, sessionId, now),
  );
  return row ? toSession(row) : null;
}

/** Deletes the session (logout); its token fails everywhere at once. False when it did not exist. */
export async function deleteSession(connection: SqlConnection, sessionId: string): Promise<boolean> {
  const deleted = await connection.database.write(() => run('delete from auth_sessions where id = ?', sessionId));
  return deleted > 0;
}

/** Removes sessions that have expired; returns how many. */
export async function deleteExpiredSessions(connection: SqlConnection, now: number = Date.now()): Promise<number> {
  return connection.database.write(() => run('delete from auth_sessions where expires_at <= ?', now));
}

// ---------------------------------------------------------------------------------------------
// Single sign-on states

/**
 * Stores a login attempt's state (only its SHA-256), nonce, PKCE verifier (towards the provider),
 * redirect target and, when the page that started it asked for a hand-over code, the S256
 * challenge that binds that code (see handover.ts).
 */
export async function saveSsoState(
  connection: SqlConnection,
  state: {
    state: string;
    provider: string;
    nonce: string;
    verifier: string;
    redirect: string;
    expiresAt: number;
    codeChallenge?: string | null;
  },
): Promise<void> {
  const stateHash = sha256Hex(state.state);
  await connection.database.write(() =>
    run(
      'insert into auth_sso_states (state_hash, provider, nonce, verifier, redirect, expires_at, code_challenge) values (?, ?, ?, ?, ?, ?, ?)',
      stateHash,
      state.provider,
      state.nonce,
      state.verifier,
      state.redirect,
      state.expiresAt,
      state.codeChallenge ?? null,
    ),
  );
}

/**
 * Takes a state for its callback: single use (the row is deleted by the same statement that reads
 * it, so two concurrent callbacks cannot both get it); null when unknown, used or expired.
 */
export async function takeSsoState(
  connection: SqlConnection,
  state: string,
  now: number = Date.now(),
): Promise<{
  provider: string;
  nonce: string;
  verifier: string;
  redirect: string;
  codeChallenge: string | null;
} | null> {
  if (state.length === 0 || state.length > MAX_TOKEN_LENGTH) return null;
  const stateHash = sha256Hex(state);
  const row = await connection.database.write(() =>
    first<{
      provider: string;
      nonce: string;
      verifier: string;
      redirect: string;
      expires_at: number;
      code_challenge: string | null;
    }>(
      'delete from auth_sso_states where state_hash = ? returning provider, nonce, verifier, redirect, expires_at, code_challenge',
      stateHash,
    ),
  );
  if (!row || Number(row.expires_at) <= now) return null;
  return {
    provider: row.provider,
    nonce: row.nonce,
    verifier: row.verifier,
    redirect: row.redirect,
    codeChallenge: row.code_challenge,
  };
}

/** Removes SSO states and codes that have expired unused; returns how many. */
export async function deleteExpiredSsoStates(connection: SqlConnection, now: number = Date.now()): Promise<number> {
  return connection.database.write(function* () {
    const states = yield* run('delete from auth_sso_states where expires_at <= ?', now);
    const codes = yield* run('delete from auth_sso_codes where expires_at <= ?', now);
    return states + codes;
  });
}

/** How long a single sign-on's hand-over code stays valid. */
export const SSO_CODE_TTL_MS = 60_000;

/**
 * A one-time code for `userId`, valid for a minute from `now`, bound to `challenge` (the S256
 * challenge of a verifier only the page that started the sign-in holds). Only the code's SHA-256
 * is stored; the code itself is returned once.
 */
export async function createSsoCode(
  connection: SqlConnection,
  userId: string,
  challenge: string,
  now: number = Date.now(),
): Promise<string> {
  const code = randomBytes(32).toString('base64url');
  const codeHash = sha256Hex(code);
  await connection.database.write(() =>
    run(
      'insert into auth_sso_codes (code_hash, user_id, expires_at, challenge) values (?, ?, ?, ?)',
      codeHash,
      userId,
      now + SSO_CODE_TTL_MS,
      challenge,
    ),
  );
  return code;
}

/**
 * Takes a code: single use, deleted by the statement that reads it, so a code presented with the
 * wrong binding is burned too and two concurrent exchanges cannot both get it. Its user and
 * binding challenge, or null when unknown, used or expired.
 */
export async function takeSsoCode(
  connection: SqlConnection,
  code: string,
  now: number = Date.now(),
): Promise<{ userId: string; challenge: string | null } | null> {
  if (code.length === 0 || code.length > MAX_TOKEN_LENGTH) return null;
  const codeHash = sha256Hex(code);
  const row = await connection.database.write(() =>
    first<{ user_id: string; expires_at: number; challenge: string | null }>(
      'delete from auth_sso_codes where code_hash = ? returning user_id, expires_at, challenge',
      codeHash,
    ),
  );
  return row && Number(row.expires_at) > now ? { userId: row.user_id, challenge: row.challenge } : null;
}

// ---------------------------------------------------------------------------------------------
// Failed-login throttling (counters shared by every instance through the database)

/** The counter of one email's current window. */
export interface LoginAttempts {
  attempts: number;
  windowStartedAt: number;
}

/** The email's (normalised) counter, or null when there is none. Expired windows are returned as stored. */
export async function findLoginAttempts(connection: SqlConnection, email: string): Promise<LoginAttempts | null> {
  const key = normaliseEmail(email);
  const row = await connection.database.read(() =>
    first<{ failures: number; window_started_at: number }>(
      'select failures, window_started_at from auth_login_failures where email = ?',
      key,
    ),
  );
  return row ? { attempts: Number(row.failures), windowStartedAt: Number(row.window_started_at) } : null;
}

/**
 * Counts one attempt for the email, atomically (one upsert, so concurrent attempts on any number
 * of instances are all counted). A window older than `windowMs` starts over at 1.
 */
export async function recordLoginAttempt(
  connection: SqlConnection,
  email: string,
  windowMs: number,
  now: number = Date.now(),
): Promise<LoginAttempts> {
  const key = normaliseEmail(email);
  const cutoff = now - windowMs;
  const row = await connection.database.write(() =>
    first<{ failures: number; window_started_at: number }>(
      `insert into auth_login_failures (email, failures, window_started_at) values (?, 1, ?)
        on conflict (email) do update set
          failures = case when auth_login_failures.window_started_at <= ? then 1 else auth_login_failures.failures + 1 end,
          window_started_at = case when auth_login_failures.window_started_at <= ? then cast(? as bigint) else auth_login_failures.window_started_at end
        returning failures, window_started_at`,
      key,
      now,
      cutoff,
      cutoff,
      now,
    ),
  );
  if (!row) throw new Error('login attempt upsert returned no row');
  return { attempts: Number(row.failures), windowStartedAt: Number(row.window_started_at) };
}

/** Forgets the email's counter (after a successful login). */
export async function clearLoginAttempts(connection: SqlConnection, email: string): Promise<void> {
  const key = normaliseEmail(email);
  await connection.database.write(() => run('delete from auth_login_failures where email = ?', key));
}

/** Removes counters whose window started at or before `before`; returns how many. */
export async function deleteLoginAttemptsBefore(connection: SqlConnection, before: number): Promise<number> {
  return connection.database.write(() => run('delete from auth_login_failures where window_started_at <= ?', before));
}
