import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { authService } from '../../../src/services/auth/index.ts';
import { createSession, createUser, findSessionByToken, type User } from '../../../src/services/auth/repository.ts';
import { LOGIN_WINDOW_MS, MAX_LOGIN_ATTEMPTS } from '../../../src/services/auth/throttle.ts';
import { first, run } from '../../../src/store/sql-work.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';
import { USER_ID, assertError, countRows, setCookieOf, tableText, type LoginBody } from './helpers.ts';

let service: TestService;
let ada: User;
const PASSWORD = 'analytical engine 1843';

before(async () => {
  service = await startTestService(authService);
  ada = await createUser(service.store.sql, { email: 'ada@example.com', password: PASSWORD, nick: 'ada' });
});

after(async () => {
  await service.close();
});

function login(payload: unknown, headers: Record<string, string> = {}) {
  return service.app.inject({ method: 'POST', url: '/v0/login', headers, payload: payload as string });
}

describe('POST /v0/login', () => {
  test('answers the login shape and sets the session cookie', async () => {
    const response = await login({ email: 'ada@example.com', password: PASSWORD });
    assert.equal(response.statusCode, 200, response.body);
    assert.match(String(response.headers['content-type']), /^application\/json/);
    assert.equal(response.headers['cache-control'], 'no-store');
    const body = response.json() as LoginBody;
    assert.deepEqual(Object.keys(body), ['user', 'token']);
    assert.deepEqual(body.user, { id: ada.id, nick: 'ada', email: 'ada@example.com' });
    assert.match(body.user.id, USER_ID);
    assert.match(body.token, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(
      setCookieOf(response),
      `stratus_session=${body.token}; Path=/; HttpOnly; Secure; SameSite=Lax; Max-Age=604800`,
    );
  });

  test('the token finds the session, and the database holds only its SHA-256', async () => {
    const body = (await login({ email: 'ada@example.com', password: PASSWORD })).json() as LoginBody;
    const found = await findSessionByToken(service.store.sql, body.token);
    assert.ok(found);
    assert.equal(found.user.id, ada.id);
    assert.equal(found.session.userId, ada.id);
    assert.equal((await tableText(service.store.sql, 'auth_sessions')).includes(body.token), false);
  });

  test('matches the email case-insensitively and ignores surrounding spaces', async () => {
    const response = await login({ email: '  ADA@Example.com ', password: PASSWORD });
    assert.equal(response.statusCode, 200, response.body);
  });

  test('parses the body as JSON whatever the Content-Type', async () => {
    const response = await login(JSON.stringify({ email: 'ada@example.com', password: PASSWORD }), {
      'content-type': 'application/x-www-form-urlencoded',
    });
    assert.equal(response.statusCode, 200, response.body);
  });

  test('wrong password and unknown email: both 401 with the same message, no cookie, no session', async () => {
    const sessionsBefore = await countRows(service.store.sql, 'auth_sessions');
    const wrong = await login({ email: 'ada@example.com', password: 'not the password' });
    const unknown = await login({ email: 'nobody@example.com', password: PASSWORD });
    const wrongMessage = assertError(wrong, 401, 'unauthorized');
    const unknownMessage = assertError(unknown, 401, 'unauthorized');
    assert.equal(wrongMessage, unknownMessage);
    assert.equal(wrong.headers['set-cookie'], undefined);
    assert.equal(unknown.headers['set-cookie'], undefined);
    assert.doesNotMatch(wrongMessage, /not the password/);
    assert.equal(await countRows(service.store.sql, 'auth_sessions'), sessionsBefore);
  });

  test('a user without a password (single sign-on only) cannot log in with any password', async () => {
    await createUser(service.store.sql, { email: 'sso-only@example.com' });
    const message = assertError(await login({ email: 'sso-only@example.com', password: '' }), 401, 'unauthorized');
    const unknown = assertError(await login({ email: 'nobody2@example.com', password: 'x' }), 401, 'unauthorized');
    assert.equal(message, unknown);
  });

  test('an unknown email takes about as long as a wrong password (a bcrypt check runs either way)', async () => {
    const once = async (email: string) => {
      const start = process.hrtime.bigint();
      await login({ email, password: 'wrong password here' });
      return Number(process.hrtime.bigint() - start) / 1e6;
    };
    // The fastest of three runs, so that a busy machine's hiccups do not decide.
    const time = async (email: string) => Math.min(await once(email), await once(email), await once(email));
    await once('warmup@example.com');
    const unknown = await time('timing-nobody@example.com');
    const known = await time('ada@example.com');
    // bcrypt at cost 10 takes tens of milliseconds; skipping it would make the unknown case far faster.
    assert.ok(unknown > known / 3, `unknown email ${unknown} ms vs wrong password ${known} ms`);
    await service.store.sql.database.write(() => run('delete from auth_login_failures'));
  });

  test('missing fields, wrong types and unknown fields are 400 validation_error', async () => {
    assertError(await login({ email: 'ada@example.com' }), 400, 'validation_error');
    assertError(await login({ password: PASSWORD }), 400, 'validation_error');
    assertError(await login({ email: 42, password: PASSWORD }), 400, 'validation_error');
    assertError(await login({ email: 'ada@example.com', password: null }), 400, 'validation_error');
    const unknown = assertError(
      await login({ email: 'ada@example.com', password: PASSWORD, remember: true }),
      400,
      'validation_error',
    );
    assert.match(unknown, /remember/);
    assertError(await login([]), 400, 'validation_error');
    assertError(await service.app.inject({ method: 'POST', url: '/v0/login' }), 400, 'validation_error');
  });

  test('malformed JSON is 400 invalid_json', async () => {
    assertError(await login('{"email":', { 'content-type': 'application/json' }), 400, 'invalid_json');
    assertError(
      await login('email=a&password=b', { 'content-type': 'application/x-www-form-urlencoded' }),
      400,
      'invalid_json',
    );
  });

  test('another method on the path is 405', async () => {
    const response = await service.app.inject({ method: 'GET', url: '/v0/login' });
    assertError(response, 405, 'method_not_allowed');
    assert.equal(response.headers.allow, 'POST');
  });
});

describe('failed-login throttling', () => {
  test(`after ${MAX_LOGIN_ATTEMPTS} failures the email answers 429 with Retry-After, even with the right password`, async () => {
    const email = 'throttled@example.com';
    const password = 'throttled password';
    await createUser(service.store.sql, { email, password });
    for (let i = 0; i < MAX_LOGIN_ATTEMPTS; i++) {
      assertError(await login({ email, password: `guess ${i}` }), 401, 'unauthorized');
    }
    const limited = await login({ email, password: 'guess 11' });
    const message = assertError(limited, 429, 'too_many_requests');
    assert.doesNotMatch(message, /guess/);
    const retryAfter = Number(limited.headers['retry-after']);
    assert.ok(
      Number.isInteger(retryAfter) && retryAfter > 0 && retryAfter <= LOGIN_WINDOW_MS / 1000,
      `Retry-After ${limited.headers['retry-after']}`,
    );
    assertError(await login({ email: email.toUpperCase(), password }), 429, 'too_many_requests');

    // Other emails are not affected.
    assert.equal((await login({ email: 'ada@example.com', password: PASSWORD })).statusCode, 200);

    // Once the window has passed, the right password works again and clears the counter.
    await service.store.sql.database.write(() =>
      run('update auth_login_failures set window_started_at = window_started_at - ?', LOGIN_WINDOW_MS),
    );
    const after = await login({ email, password });
    assert.equal(after.statusCode, 200, after.body);
    assert.equal(
      (
        await service.store.sql.database.read(() =>
          first<{ n: number }>('select count(*) as n from auth_login_failures where email = ?', email),
        )
      )?.n,
      0,
    );
  });

  test('unknown emails are throttled too, so a 429 does not reveal that an account exists', async () => {
    const email = 'ghost@example.com';
    for (let i = 0; i < MAX_LOGIN_ATTEMPTS; i++)
      assertError(await login({ email, password: `guess ${i}` }), 401, 'unauthorized');
    assertError(await login({ email, password: 'again' }), 429, 'too_many_requests');
  });

  test('concurrent guesses cannot exceed the limit', async () => {
    const email = 'parallel@example.com';
    const results = await Promise.all(
      Array.from({ length: MAX_LOGIN_ATTEMPTS + 5 }, (_, i) => login({ email, password: `guess ${i}` })),
    );
    assert.equal(results.filter((r) => r.statusCode === 401).length, MAX_LOGIN_ATTEMPTS);
    assert.equal(results.filter((r) => r.statusCode === 429).length, 5);
  });

  test('a successful login clears earlier failures', async () => {
    const email = 'forgetful@example.com';
    await createUser(service.store.sql, { email, password: 'the real one' });
    for (let i = 0; i < MAX_LOGIN_ATTEMPTS - 1; i++)
      assertError(await login({ email, password: 'typo' }), 401, 'unauthorized');
    assert.equal((await login({ email, password: 'the real one' })).statusCode, 200);
    for (let i = 0; i < MAX_LOGIN_ATTEMPTS - 1; i++)
      assertError(await login({ email, password: 'typo' }), 401, 'unauthorized');
    assert.equal((await login({ email, password: 'the real one' })).statusCode, 200);
  });
});

describe('POST /v0/logout', () => {
  test('deletes the session named by the identity and clears the cookie', async () => {
    const body = (await login({ email: 'ada@example.com', password: PASSWORD })).json() as LoginBody;
    const found = await findSessionByToken(service.store.sql, body.token);
    assert.ok(found);
    const response = await service.app.inject({
      method: 'POST',
      url: '/v0/logout',
      headers: asUser(ada.id, { session: { id: found.session.id }, auth: { method: 'session' } }),
    });
    assert.equal(response.statusCode, 204);
    assert.equal(response.body, '');
    assert.equal(setCookieOf(response), 'stratus_session=; Path=/; HttpOnly; Secure; SameSite=Lax; Max-Age=0');
    assert.equal(await findSessionByToken(service.store.sql, body.token), null);
  });

  test('only that session ends; the user’s other sessions live on', async () => {
    const first = await createSession(service.store.sql, ada.id);
    const second = await createSession(service.store.sql, ada.id);
    const response = await service.app.inject({
      method: 'POST',
      url: '/v0/logout',
      headers: asUser(ada.id, { session: { id: first.session.id } }),
    });
    assert.equal(response.statusCode, 204);
    assert.equal(await findSessionByToken(service.store.sql, first.token), null);
    assert.ok(await findSessionByToken(service.store.sql, second.token));
  });

  test('without a session identity (anonymous, API key, repeated logout) it is still 204 with the clearing cookie', async () => {
    const sessionsBefore = await countRows(service.store.sql, 'auth_sessions');
    for (const headers of [
      {},
      asUser(ada.id, { auth: { method: 'api_key', key: 'k' } }),
      asUser(ada.id, { session: { id: '00000000-0000-4000-8000-000000000000' } }),
      { 'x-gateway-authentication': 'not json' },
    ]) {
      const response = await service.app.inject({ method: 'POST', url: '/v0/logout', headers });
      assert.equal(response.statusCode, 204);
      assert.match(setCookieOf(response), /^stratus_session=; .*Max-Age=0/);
    }
    assert.equal(await countRows(service.store.sql, 'auth_sessions'), sessionsBefore);
  });

  test('ignores whatever body is sent along', async () => {
    const response = await service.app.inject({
      method: 'POST',
      url: '/v0/logout',
      headers: { 'content-type': 'application/json' },
      payload: '{not json',
    });
    assert.equal(response.statusCode, 204);
  });
});

describe('GET /v0/me', () => {
  test('returns the bare user record of the caller', async () => {
    const response = await service.app.inject({ method: 'GET', url: '/v0/me', headers: asUser(ada.id) });
    assert.equal(response.statusCode, 200, response.body);
    assert.deepEqual(response.json(), {
      id: ada.id,
      email: 'ada@example.com',
      nick: 'ada',
      created_at: ada.created_at,
    });
  });

  test('leaves out members the platform does not know', async () => {
    const bare = await createUser(service.store.sql, { email: 'bare@example.com', password: 'bare password' });
    const response = await service.app.inject({ method: 'GET', url: '/v0/me', headers: asUser(bare.id) });
    assert.deepEqual(Object.keys(response.json() as object), ['id', 'email', 'created_at']);
  });

  test('401 without identity, with a malformed one, or for a user that no longer exists', async () => {
    assertError(await service.app.inject({ method: 'GET', url: '/v0/me' }), 401, 'unauthorized');
    assertError(
      await service.app.inject({
        method: 'GET',
        url: '/v0/me',
        headers: { 'x-gateway-authentication': '{"user":{}}' },
      }),
      401,
      'unauthorized',
    );
    assertError(
      await service.app.inject({
        method: 'GET',
        url: '/v0/me',
        headers: asUser('user-00000000-0000-4000-8000-000000000000'),
      }),
      401,
      'unauthorized',
    );
  });
});

describe('service basics', () => {
  test('GET /version is plain text', async () => {
    const response = await service.app.inject({ method: 'GET', url: '/version' });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^text\/plain/);
    assert.match(response.body, /^\d+\.\d+\.\d+/);
  });

  test('the OpenAPI document lists the routes', async () => {
    const response = await service.app.inject({ method: 'GET', url: '/openapi.json' });
    assert.equal(response.statusCode, 200);
    const doc = response.json() as { openapi: string; paths: Record<string, unknown> };
    assert.equal(doc.openapi, '3.0.3');
    for (const path of ['/v0/login', '/v0/logout', '/v0/me', '/v0/signup']) assert.ok(path in doc.paths, path);
  });

  test('unknown paths are 404 not_found', async () => {
    assertError(await service.app.inject({ method: 'GET', url: '/v0/nothing' }), 404, 'not_found');
  });
});

describe('POST /v0/session/token', () => {
  test('trades a session for a new bearer session of the same user, without touching cookies', async () => {
    const current = await createSession(service.store.sql, ada.id);
    const response = await service.app.inject({
      method: 'POST',
      url: '/v0/session/token',
      headers: asUser(ada.id, { session: { id: current.session.id }, auth: { method: 'session' } }),
    });
    assert.equal(response.statusCode, 200, response.body);
    assert.equal(response.headers['set-cookie'], undefined);
    assert.equal(response.headers['cache-control'], 'no-store');
    const body = response.json<{ token: string; expires_at: string }>();
    assert.match(body.token, /^[A-Za-z0-9_-]{43}$/);
    assert.notEqual(body.token, current.token);
    assert.ok(Date.parse(body.expires_at) > Date.now());
    const found = await findSessionByToken(service.store.sql, body.token);
    assert.equal(found?.user.id, ada.id);
  });

  test('refuses callers without a session: anonymous 401, an API key 403', async () => {
    assertError(await service.app.inject({ method: 'POST', url: '/v0/session/token' }), 401, 'unauthorized');
    assertError(
      await service.app.inject({
        method: 'POST',
        url: '/v0/session/token',
        headers: asUser(ada.id, { auth: { method: 'api_key', key: 'k' } }),
      }),
      403,
      'forbidden',
    );
    assertError(
      await service.app.inject({ method: 'GET', url: '/v0/session/token', headers: asUser(ada.id) }),
      405,
      'method_not_allowed',
    );
    assertError(
      await service.app.inject({
        method: 'POST',
        url: '/v0/session/token',
        headers: { 'content-type': 'application/json' },
        payload: { code: 'made-up' },
      }),
      401,
      'unauthorized',
    );
    assertError(
      await service.app.inject({
        method: 'POST',
        url: '/v0/session/token',
        headers: { 'content-type': 'application/json' },
        payload: { code: 5 },
      }),
      400,
      'validation_error',
    );
    assertError(
      await service.app.inject({
        method: 'POST',
        url: '/v0/session/token',
        headers: { 'content-type': 'application/json' },
        payload: { code: 'x', more: 1 },
      }),
      400,
      'validation_error',
    );
  });
});
