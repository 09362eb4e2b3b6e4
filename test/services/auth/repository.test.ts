import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { verify } from '@node-rs/bcrypt';
import pino from 'pino';
import { authService } from '../../../src/services/auth/index.ts';
import {
  SESSION_LIFETIME_MS,
  SSO_CODE_TTL_MS,
  clearLoginAttempts,
  createSession,
  createSsoCode,
  createUser,
  deleteExpiredSessions,
  deleteSession,
  extendSession,
  findLoginAttempts,
  findSessionById,
  findSessionByToken,
  findUserByEmail,
  findUserById,
  findUserByIdentity,
  linkIdentity,
  recordLoginAttempt,
  saveSsoState,
  takeSsoCode,
  takeSsoState,
  updateUserProfile,
} from '../../../src/services/auth/repository.ts';
import { startSweeper, sweepExpired } from '../../../src/services/auth/sweeper.ts';
import { all } from '../../../src/store/sql-work.ts';
import type { SqlConnection } from '../../../src/store/db.ts';
import { startTestService, type TestService } from '../../helpers/service.ts';
import { RFC3339_UTC, USER_ID, UUID_V4, countRows, tableText } from './helpers.ts';

let service: TestService;
let conn: SqlConnection;

before(async () => {
  service = await startTestService(authService);
  conn = service.store.sql;
});

after(async () => {
  await service.close();
});

let counter = 0;
const uniqueEmail = (label: string) => `${label}-${++counter}@example.com`;

describe('users', () => {
  test('createUser stores a normalised email, a bcrypt hash of cost 10, and returns the record', async () => {
    const user = await createUser(conn, {
      email: '  Ada.Lovelace@Example.COM ',
      password: 'correct horse',
      nick: 'ada',
    });
    assert.match(user.id, USER_ID);
    assert.equal(user.email, 'ada.lovelace@example.com');
    assert.equal(user.nick, 'ada');
    assert.equal('picture' in user, false);
    assert.match(user.created_at, RFC3339_UTC);
    assert.deepEqual(Object.keys(user), ['id', 'email', 'nick', 'created_at']);

    const stored = await findUserByEmail(conn, 'ADA.LOVELACE@example.com');
    assert.ok(stored);
    assert.equal(stored.id, user.id);
    assert.match(stored.passwordHash ?? '', /^\$2[aby]\$10\$/);
    assert.equal(await verify('correct horse', stored.passwordHash ?? ''), true);
    assert.doesNotMatch(await tableText(conn, 'auth_users'), /correct horse/);
  });

  test('duplicate email (any case) is a 409 conflict and stores nothing', async () => {
    const email = uniqueEmail('dup');
    await createUser(conn, { email, password: 'password-1' });
    const before = await countRows(conn, 'auth_users');
    await assert.rejects(createUser(conn, { email: email.toUpperCase(), password: 'password-2' }), (error: unknown) => {
      assert.equal((error as { status?: number }).status, 409);
      assert.equal((error as { code?: string }).code, 'conflict');
      assert.doesNotMatch((error as Error).message, /password-2/);
      return true;
    });
    assert.equal(await countRows(conn, 'auth_users'), before);
  });

  test('a user without a password has a null hash; findUserById leaves unknown members out', async () => {
    const user = await createUser(conn, { email: uniqueEmail('sso'), picture: 'https://example.com/p.png' });
    const stored = await findUserByEmail(conn, user.email);
    assert.equal(stored?.passwordHash, null);
    const byId = await findUserById(conn, user.id);
    assert.deepEqual(byId, {
      id: user.id,
      email: user.email,
      picture: 'https://example.com/p.png',
      created_at: user.created_at,
    });
    assert.equal(await findUserById(conn, 'user-00000000-0000-4000-8000-000000000000'), null);
    assert.equal(await findUserByEmail(conn, 'nobody@example.com'), null);
  });

  test('updateUserProfile sets only the given fields', async () => {
    const user = await createUser(conn, { email: uniqueEmail('profile'), nick: 'old' });
    await updateUserProfile(conn, user.id, { picture: 'https://example.com/new.png' });
    assert.deepEqual(await findUserById(conn, user.id), { ...user, picture: 'https://example.com/new.png' });
    await updateUserProfile(conn, user.id, { nick: 'new' });
    assert.equal((await findUserById(conn, user.id))?.nick, 'new');
    await updateUserProfile(conn, user.id, {});
    assert.equal((await findUserById(conn, user.id))?.nick, 'new');
  });
});

describe('identities', () => {
  test('link, find, relink to the same user, refuse another user', async () => {
    const ada = await createUser(conn, { email: uniqueEmail('link') });
    const bob = await createUser(conn, { email: uniqueEmail('link') });
    assert.equal(await findUserByIdentity(conn, 'google', 'sub-1'), null);
    await linkIdentity(conn, 'google', 'sub-1', ada.id);
    assert.equal((await findUserByIdentity(conn, 'google', 'sub-1'))?.id, ada.id);
    assert.equal(await findUserByIdentity(conn, 'github', 'sub-1'), null);
    await linkIdentity(conn, 'google', 'sub-1', ada.id);
    await assert.rejects(
      linkIdentity(conn, 'google', 'sub-1', bob.id),
      (error: unknown) => (error as { status?: number }).status === 409,
    );
    assert.equal((await findUserByIdentity(conn, 'google', 'sub-1'))?.id, ada.id);
  });
});

describe('sessions', () => {
  test('createSession returns a 256-bit base64url token; only its SHA-256 is stored', async () => {
    const user = await createUser(conn, { email: uniqueEmail('session') });
    const now = Date.now();
    const { token, session } = await createSession(conn, user.id, now);
    assert.match(token, /^[A-Za-z0-9_-]{43}$/);
    assert.match(session.id, UUID_V4);
    assert.deepEqual(session, {
      id: session.id,
      userId: user.id,
      createdAt: now,
      expiresAt: now + SESSION_LIFETIME_MS,
      lastSeenAt: now,
    });

    const text = await tableText(conn, 'auth_sessions');
    assert.equal(text.includes(token), false, 'the raw token must not be stored');
    const digest = createHash('sha256').update(token).digest('hex');
    const rows = await conn.database.read(() =>
      all<{ token_hash: string }>('select token_hash from auth_sessions where id = ?', session.id),
    );
    assert.equal(rows[0]?.token_hash, digest);

    const found = await findSessionByToken(conn, token, now + 1000);
    assert.deepEqual(found, { session, user });
  });

  test('unknown, empty and expired tokens are not found', async () => {
    const user = await createUser(conn, { email: uniqueEmail('expiry') });
    const now = Date.now();
    const { token } = await createSession(conn, user.id, now);
    assert.equal(await findSessionByToken(conn, 'x'.repeat(43), now), null);
    assert.equal(await findSessionByToken(conn, '', now), null);
    assert.ok(await findSessionByToken(conn, token, now + SESSION_LIFETIME_MS - 1));
    assert.equal(await findSessionByToken(conn, token, now + SESSION_LIFETIME_MS), null);
    assert.equal(await findSessionByToken(conn, token, now + SESSION_LIFETIME_MS + 60_000), null);
  });

  test('extendSession slides the expiry and last_seen_at; an expired session stays expired', async () => {
    const user = await createUser(conn, { email: uniqueEmail('slide') });
    const t0 = Date.now();
    const { token, session } = await createSession(conn, user.id, t0);
    const t1 = t0 + 3 * 24 * 3600 * 1000;
    const extended = await extendSession(conn, session.id, t1);
    assert.deepEqual(extended, { ...session, expiresAt: t1 + SESSION_LIFETIME_MS, lastSeenAt: t1 });
    // Past the original expiry, yet alive thanks to the slide.
    const t2 = t0 + SESSION_LIFETIME_MS + 1000;
    assert.equal((await findSessionByToken(conn, token, t2))?.session.expiresAt, t1 + SESSION_LIFETIME_MS);

    const late = t1 + SESSION_LIFETIME_MS + 1;
    assert.equal(await extendSession(conn, session.id, late), null);
    assert.equal(await findSessionByToken(conn, token, late), null);
    assert.equal(await extendSession(conn, '00000000-0000-4000-8000-000000000000', t1), null);
  });

  test('deleteSession ends it at once; deleting again is false', async () => {
    const user = await createUser(conn, { email: uniqueEmail('delete') });
    const { token, session } = await createSession(conn, user.id);
    assert.equal(await deleteSession(conn, session.id), true);
    assert.equal(await findSessionByToken(conn, token), null);
    assert.equal(await deleteSession(conn, session.id), false);
  });

  test('deleteExpiredSessions removes only expired sessions', async () => {
    const user = await createUser(conn, { email: uniqueEmail('sweep') });
    const now = Date.now();
    const old = await createSession(conn, user.id, now - SESSION_LIFETIME_MS - 5000);
    const live = await createSession(conn, user.id, now);
    const deleted = await deleteExpiredSessions(conn, now);
    assert.ok(deleted >= 1);
    const ids = (await conn.database.read(() => all<{ id: string }>('select id from auth_sessions'))).map((r) => r.id);
    assert.equal(ids.includes(old.session.id), false);
    assert.equal(ids.includes(live.session.id), true);
  });
});

describe('SSO states', () => {
  test('stored as a hash, taken once, never after expiry', async () => {
    const now = Date.now();
    const state = {
      state: 'state-abc-123',
      provider: 'google',
      nonce: 'n-1',
      verifier: 'v-1',
      redirect: '/console',
      expiresAt: now + 600_000,
    };
    await saveSsoState(conn, state);
    assert.equal((await tableText(conn, 'auth_sso_states')).includes('state-abc-123'), false);
    assert.equal(await takeSsoState(conn, 'state-unknown', now), null);
    assert.deepEqual(await takeSsoState(conn, 'state-abc-123', now), {
      provider: 'google',
      nonce: 'n-1',
      verifier: 'v-1',
      redirect: '/console',
      codeChallenge: null,
    });
    assert.equal(await takeSsoState(conn, 'state-abc-123', now), null, 'single use');

    await saveSsoState(conn, { ...state, state: 'state-expired' });
    assert.equal(await takeSsoState(conn, 'state-expired', now + 600_000), null);
    assert.equal(await takeSsoState(conn, 'state-expired', now), null, 'an expired take still consumes it');
  });

  test('a state keeps the hand-over challenge it was started with', async () => {
    const now = Date.now();
    const codeChallenge = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
    await saveSsoState(conn, {
      state: 'state-with-challenge',
      provider: 'p',
      nonce: 'n',
      verifier: 'v',
      redirect: '/',
      expiresAt: now + 600_000,
      codeChallenge,
    });
    assert.equal((await takeSsoState(conn, 'state-with-challenge', now))?.codeChallenge, codeChallenge);
  });

  test('concurrent takes of one state: exactly one wins', async () => {
    const now = Date.now();
    await saveSsoState(conn, {
      state: 'state-race',
      provider: 'p',
      nonce: 'n',
      verifier: 'v',
      redirect: '/',
      expiresAt: now + 600_000,
    });
    const results = await Promise.all(Array.from({ length: 5 }, () => takeSsoState(conn, 'state-race', now)));
    assert.equal(results.filter((r) => r !== null).length, 1);
  });
});

describe('SSO hand-over codes', () => {
  const challenge = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';

  test('stored as a hash with their challenge, single use, valid 60 s by the given clock', async () => {
    assert.equal(SSO_CODE_TTL_MS, 60_000);
    const user = await createUser(conn, { email: uniqueEmail('code') });
    const now = Date.now();
    const code = await createSsoCode(conn, user.id, challenge, now);
    assert.match(code, /^[A-Za-z0-9_-]{43}$/);
    const rows = await conn.database.read(() => all('select * from auth_sso_codes'));
    assert.ok(!JSON.stringify(rows).includes(code));
    assert.deepEqual(await takeSsoCode(conn, code, now + SSO_CODE_TTL_MS - 1), { userId: user.id, challenge });
    assert.equal(await takeSsoCode(conn, code, now), null, 'single use');

    const late = await createSsoCode(conn, user.id, challenge, now);
    assert.equal(await takeSsoCode(conn, late, now + SSO_CODE_TTL_MS), null, 'expired at 60 s');
    assert.equal(await takeSsoCode(conn, late, now), null, 'an expired take still consumes it');
    assert.equal(await takeSsoCode(conn, 'x'.repeat(600), now), null);
  });

  test('concurrent takes of one code: exactly one wins', async () => {
    const user = await createUser(conn, { email: uniqueEmail('code-race') });
    const code = await createSsoCode(conn, user.id, challenge);
    const results = await Promise.all(Array.from({ length: 5 }, () => takeSsoCode(conn, code)));
    assert.equal(results.filter((r) => r !== null).length, 1);
  });
});

describe('findSessionById', () => {
  test('finds a live session, not a deleted or expired one', async () => {
    const user = await createUser(conn, { email: uniqueEmail('by-id') });
    const now = Date.now();
    const live = await createSession(conn, user.id, now);
    assert.deepEqual(await findSessionById(conn, live.session.id, now), live.session);
    assert.equal(await findSessionById(conn, live.session.id, now + SESSION_LIFETIME_MS), null);
    await deleteSession(conn, live.session.id);
    assert.equal(await findSessionById(conn, live.session.id, now), null);
  });
});

describe('login attempt counters', () => {
  test('count per normalised email, restart after the window, clear', async () => {
    const email = uniqueEmail('attempts');
    const window = 15 * 60 * 1000;
    const t0 = Date.now();
    assert.equal(await findLoginAttempts(conn, email), null);
    assert.deepEqual(await recordLoginAttempt(conn, email, window, t0), { attempts: 1, windowStartedAt: t0 });
    assert.deepEqual(await recordLoginAttempt(conn, email.toUpperCase(), window, t0 + 1000), {
      attempts: 2,
      windowStartedAt: t0,
    });
    assert.deepEqual(await recordLoginAttempt(conn, email, window, t0 + window), {
      attempts: 1,
      windowStartedAt: t0 + window,
    });
    await clearLoginAttempts(conn, email);
    assert.equal(await findLoginAttempts(conn, email), null);
  });

  test('concurrent attempts are all counted', async () => {
    const email = uniqueEmail('attempts-race');
    const now = Date.now();
    await Promise.all(Array.from({ length: 12 }, () => recordLoginAttempt(conn, email, 900_000, now)));
    assert.equal((await findLoginAttempts(conn, email))?.attempts, 12);
  });
});

describe('sweepExpired', () => {
  test('deletes expired sessions, SSO states and stale counters, keeps live ones', async () => {
    const user = await createUser(conn, { email: uniqueEmail('sweeper') });
    const now = Date.now();
    const live = await createSession(conn, user.id, now);
    await createSession(conn, user.id, now - SESSION_LIFETIME_MS - 1);
    await saveSsoState(conn, {
      state: 'sweep-old',
      provider: 'p',
      nonce: 'n',
      verifier: 'v',
      redirect: '/',
      expiresAt: now - 1,
    });
    await saveSsoState(conn, {
      state: 'sweep-live',
      provider: 'p',
      nonce: 'n',
      verifier: 'v',
      redirect: '/',
      expiresAt: now + 60_000,
    });
    await recordLoginAttempt(conn, 'sweep-old@example.com', 900_000, now - 900_001);
    await recordLoginAttempt(conn, 'sweep-live@example.com', 900_000, now);

    const counts = await sweepExpired(conn, now);
    assert.ok(counts.sessions >= 1 && counts.ssoStates >= 1 && counts.loginCounters >= 1, JSON.stringify(counts));
    assert.ok(await findSessionByToken(conn, live.token, now));
    assert.equal(await findLoginAttempts(conn, 'sweep-old@example.com'), null);
    assert.ok(await findLoginAttempts(conn, 'sweep-live@example.com'));
    assert.ok(await takeSsoState(conn, 'sweep-live', now));
  });
});

describe('startSweeper', () => {
  test('sweeps on its interval and stops when asked', async () => {
    const user = await createUser(conn, { email: uniqueEmail('timer') });
    const expired = await createSession(conn, user.id, Date.now() - SESSION_LIFETIME_MS - 1);
    const exists = async (id: string) =>
      (await conn.database.read(() => all<{ id: string }>('select id from auth_sessions where id = ?', id))).length > 0;
    assert.equal(await exists(expired.session.id), true);
    const stop = startSweeper(conn, pino({ level: 'silent' }), 20);
    try {
      const deadline = Date.now() + 5000;
      while ((await exists(expired.session.id)) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(await exists(expired.session.id), false);
    } finally {
      await stop();
    }
    const later = await createSession(conn, user.id, Date.now() - SESSION_LIFETIME_MS - 1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(await exists(later.session.id), true, 'no sweep after stop');
  });
});
