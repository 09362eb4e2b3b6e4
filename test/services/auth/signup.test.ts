import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { verify } from '@node-rs/bcrypt';
import { authService } from '../../../src/services/auth/index.ts';
import { findSessionByToken, findUserByEmail } from '../../../src/services/auth/repository.ts';
import { startTestService, type TestService } from '../../helpers/service.ts';
import { USER_ID, assertError, countRows, setCookieOf, type LoginBody } from './helpers.ts';

describe('POST /v0/signup with SIGNUP=open', () => {
  let service: TestService;

  before(async () => {
    service = await startTestService(authService, { signup: 'open', domain: 'example.com', cookieSecure: false });
  });

  after(async () => {
    await service.close();
  });

  const signup = (payload: unknown) =>
    service.app.inject({ method: 'POST', url: '/v0/signup', payload: payload as string });

  test('creates the user, logs them in (201, login shape, cookie) and stores a bcrypt hash', async () => {
    const response = await signup({ email: 'Grace@Example.com', password: 'cobol forever', nick: 'grace' });
    assert.equal(response.statusCode, 201, response.body);
    assert.equal(response.headers['cache-control'], 'no-store');
    const body = response.json() as LoginBody;
    assert.match(body.user.id, USER_ID);
    assert.deepEqual(body.user, { id: body.user.id, nick: 'grace', email: 'grace@example.com' });
    assert.equal(
      setCookieOf(response),
      `stratus_session=${body.token}; Path=/; HttpOnly; SameSite=Lax; Max-Age=604800`,
      'host-only, also for a dotted domain',
    );
    assert.equal((await findSessionByToken(service.store.sql, body.token))?.user.id, body.user.id);
    const stored = await findUserByEmail(service.store.sql, 'grace@example.com');
    assert.equal(await verify('cobol forever', stored?.passwordHash ?? ''), true);

    const login = await service.app.inject({
      method: 'POST',
      url: '/v0/login',
      payload: { email: 'grace@example.com', password: 'cobol forever' },
    });
    assert.equal(login.statusCode, 200);
  });

  test('nick is optional and left out of the answer when not given', async () => {
    const response = await signup({ email: 'nonick@example.com', password: 'password123' });
    assert.equal(response.statusCode, 201, response.body);
    assert.deepEqual(Object.keys((response.json() as LoginBody).user), ['id', 'email']);
  });

  test('a duplicate email, in any case, is 409 conflict', async () => {
    await signup({ email: 'dup@example.com', password: 'password123' });
    const users = await countRows(service.store.sql, 'auth_users');
    const response = await signup({ email: ' DUP@example.COM', password: 'other password' });
    assertError(response, 409, 'conflict');
    assert.equal(response.headers['set-cookie'], undefined);
    assert.equal(await countRows(service.store.sql, 'auth_users'), users);
  });

  test('bad passwords, emails and fields are 400 validation_error and create nothing', async () => {
    const users = await countRows(service.store.sql, 'auth_users');
    const short = assertError(
      await signup({ email: 'short@example.com', password: '1234567' }),
      400,
      'validation_error',
    );
    assert.doesNotMatch(short, /1234567/);
    assertError(await signup({ email: 'long@example.com', password: 'x'.repeat(1025) }), 400, 'validation_error');
    assertError(await signup({ email: 'not-an-email', password: 'password123' }), 400, 'validation_error');
    assertError(await signup({ email: 'two@@example.com', password: 'password123' }), 400, 'validation_error');
    assertError(await signup({ email: 'spa ce@example.com', password: 'password123' }), 400, 'validation_error');
    assertError(
      await signup({ email: `${'a'.repeat(250)}@example.com`, password: 'password123' }),
      400,
      'validation_error',
    );
    assertError(await signup({ email: '   ', password: 'password123' }), 400, 'validation_error');
    assertError(await signup({ email: 'x@example.com', password: 'password123', nick: '' }), 400, 'validation_error');
    assertError(
      await signup({ email: 'x@example.com', password: 'password123', admin: true }),
      400,
      'validation_error',
    );
    assertError(await signup({ email: 'x@example.com' }), 400, 'validation_error');
    assertError(await signup({ password: 'password123' }), 400, 'validation_error');
    assertError(
      await service.app.inject({
        method: 'POST',
        url: '/v0/signup',
        headers: { 'content-type': 'application/json' },
        payload: '{oops',
      }),
      400,
      'invalid_json',
    );
    assert.equal(await countRows(service.store.sql, 'auth_users'), users);
  });

  test('the password rule counts characters, not bytes: 8 emoji are a valid password', async () => {
    const response = await signup({ email: 'emoji@example.com', password: '🔑'.repeat(8) });
    assert.equal(response.statusCode, 201, response.body);
    assertError(await signup({ email: 'emoji2@example.com', password: '🔑'.repeat(7) }), 400, 'validation_error');
  });

  test('a dotless domain such as admin@localhost is accepted', async () => {
    assert.equal((await signup({ email: 'admin@localhost', password: 'password123' })).statusCode, 201);
  });
});

describe('POST /v0/signup with SIGNUP=closed (the default)', () => {
  let service: TestService;

  before(async () => {
    service = await startTestService(authService);
  });

  after(async () => {
    await service.close();
  });

  test('403 forbidden for any request, valid or not, and nothing is stored', async () => {
    assert.equal(service.settings.signup, 'closed');
    assertError(
      await service.app.inject({
        method: 'POST',
        url: '/v0/signup',
        payload: { email: 'a@example.com', password: 'password123' },
      }),
      403,
      'forbidden',
    );
    assertError(
      await service.app.inject({
        method: 'POST',
        url: '/v0/signup',
        headers: { 'content-type': 'application/json' },
        payload: '{oops',
      }),
      403,
      'forbidden',
    );
    assert.equal(await countRows(service.store.sql, 'auth_users'), 0);
  });
});
