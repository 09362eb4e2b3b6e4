import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { SignJWT, UnsecuredJWT, generateKeyPair } from 'jose';
import { authService } from '../../../src/services/auth/index.ts';
import {
  createUser,
  findSessionByToken,
  findUserByIdentity,
  saveSsoState,
} from '../../../src/services/auth/repository.ts';
import { closedPort } from '../../helpers/http.ts';
import { startTestIdp, type TestIdp } from '../../helpers/oidc-provider.ts';
import { startTestService, type TestService } from '../../helpers/service.ts';
import { USER_ID, assertError, countRows, setCookieOf, tableText, type LoginBody } from './helpers.ts';

const HOST = 'auth.localhost';
const CALLBACK = 'http://auth.localhost/v0/sso/test/callback';

function tokenFromCookie(setCookie: string): string {
  const match = /^stratus_session=([A-Za-z0-9_-]+);/.exec(setCookie);
  assert.ok(match?.[1], `not a session cookie: ${setCookie}`);
  return match[1];
}

/** A console's hand-over binding: the verifier it keeps and the `code_challenge` it sends to /login. */
const VERIFIER = randomBytes(32).toString('base64url');
const CHALLENGE = createHash('sha256').update(VERIFIER).digest('base64url');

/** A sign-on's redirect: the target it was given, and the one-time `sso_code` added to it. */
function splitCode(location: string | string[] | undefined): { target: string; code: string } {
  const url = new URL(String(location));
  const code = url.searchParams.get('sso_code') ?? '';
  assert.match(code, /^[A-Za-z0-9_-]{43}$/);
  url.searchParams.delete('sso_code');
  return { target: url.href, code };
}

describe('single sign-on routes', { timeout: 120_000 }, () => {
  let idp: TestIdp;
  let other: TestIdp;
  let service: TestService;
  let closed: TestService;
  let downIssuer: string;

  const accounts = [
    {
      sub: 'alice',
      email: 'alice@example.com',
      email_verified: true,
      name: 'Alice Liddell',
      picture: 'https://example.com/alice.png',
    },
    { sub: 'bob', email: 'bob@example.com', email_verified: false, nickname: 'bobby' },
    { sub: 'carol', email: 'carol@example.com', email_verified: true, preferred_username: 'carol' },
  ];

  before(async () => {
    idp = await startTestIdp({ accounts });
    other = await startTestIdp({ clientId: 'other-client', accounts, tokenEndpointAuthMethod: 'client_secret_post' });
    downIssuer = `http://127.0.0.1:${await closedPort()}`;
    const authProviders = [
      { name: 'test', issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret },
      { name: 'other', issuer: other.issuer, clientId: other.clientId, clientSecret: other.clientSecret },
      { name: 'down', issuer: downIssuer, clientId: 'down-client', clientSecret: 'down-secret' },
    ];
    service = await startTestService(authService, { authProviders, signup: 'open', cookieSecure: true });
    closed = await startTestService(authService, { authProviders, signup: 'closed' });
  });
  after(async () => {
    await service?.close();
    await closed?.close();
    await idp?.close();
    await other?.close();
  });

  const get = (svc: TestService, url: string, headers: Record<string, string> = {}) =>
    svc.app.inject({ method: 'GET', url, headers: { host: HOST, ...headers } });
  const postToken = (svc: TestService, provider: string, payload: unknown, headers: Record<string, string> = {}) =>
    svc.app.inject({
      method: 'POST',
      url: `/v0/sso/${provider}/token`,
      headers: { host: HOST, 'content-type': 'application/json', ...headers },
      payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
    });

  /** GET /login and the Location it answers with. */
  async function startLogin(svc: TestService, query = '', provider = 'test'): Promise<URL> {
    const response = await get(svc, `/v0/sso/${provider}/login${query}`);
    assert.equal(response.statusCode, 302, response.body);
    return new URL(String(response.headers.location));
  }

  /** The provider's redirect back to us, as a path + query to inject. */
  async function signInAt(
    svc: TestService,
    account: string,
    options: { query?: string; tamper?: (location: URL) => void; provider?: TestIdp; name?: string } = {},
  ): Promise<string> {
    const location = await startLogin(svc, options.query ?? '', options.name ?? 'test');
    options.tamper?.(location);
    const back = await (options.provider ?? idp).authorize(location.href, { account });
    assert.equal(back.origin, 'http://auth.localhost');
    return back.pathname + back.search;
  }

  describe('GET /v0/sso/{provider}/login', () => {
    test('redirects to the authorization endpoint with every required parameter and a S256 challenge', async () => {
      const states = await countRows(service.store.sql, 'auth_sso_states');
      const response = await get(service, '/v0/sso/test/login');
      assert.equal(response.statusCode, 302);
      assert.equal(response.headers['cache-control'], 'no-store');
      assert.equal(response.headers['set-cookie'], undefined);
      const location = new URL(String(response.headers.location));
      assert.equal(`${location.origin}${location.pathname}`, `${idp.issuer}/auth`);
      const q = location.searchParams;
      assert.equal(q.get('response_type'), 'code');
      assert.equal(q.get('client_id'), idp.clientId);
      assert.equal(q.get('redirect_uri'), CALLBACK);
      assert.equal(q.get('scope'), 'openid email profile');
      assert.equal(q.get('code_challenge_method'), 'S256');
      for (const name of ['state', 'nonce', 'code_challenge'])
        assert.match(q.get(name) ?? '', /^[A-Za-z0-9_-]{43,}$/, name);
      assert.notEqual(q.get('state'), q.get('nonce'));
      assert.equal(await countRows(service.store.sql, 'auth_sso_states'), states + 1);
      // Only the state's hash is stored.
      assert.ok(!(await tableText(service.store.sql, 'auth_sso_states')).includes(q.get('state') ?? '-'));
      // A fresh state every time.
      const again = await startLogin(service);
      assert.notEqual(again.searchParams.get('state'), q.get('state'));
      assert.notEqual(again.searchParams.get('code_challenge'), q.get('code_challenge'));
    });

    test('the redirect URI keeps the scheme and port the browser used', async () => {
      const uri = async (headers: Record<string, string>) =>
        new URL(String((await get(service, '/v0/sso/test/login', headers)).headers.location)).searchParams.get(
          'redirect_uri',
        );
      assert.equal(await uri({ host: 'auth.localhost:8080' }), 'http://auth.localhost:8080/v0/sso/test/callback');
      assert.equal(
        await uri({ 'x-forwarded-proto': 'https', 'x-forwarded-host': 'auth.localhost:8443' }),
        'https://auth.localhost:8443/v0/sso/test/callback',
      );
      assert.equal(
        await uri({ 'x-forwarded-proto': 'https', host: 'auth.localhost:443' }),
        'https://auth.localhost/v0/sso/test/callback',
      );
      assert.equal(await uri({ host: 'auth.localhost:80' }), 'http://auth.localhost/v0/sso/test/callback');
      // The host name is always auth.<domain>, whatever Host says.
      assert.equal(await uri({ host: 'evil.example:9000' }), 'http://auth.localhost:9000/v0/sso/test/callback');
    });

    test('bad redirect targets are 400 validation_error and store nothing', async () => {
      const states = await countRows(service.store.sql, 'auth_sso_states');
      for (const bad of [
        '//evil.example/',
        '/\\evil.example',
        'https://evil.example/',
        'http://localhost.evil.example/',
        'http://evillocalhost/',
        'javascript:alert(1)',
        'ftp://console.localhost/',
        'http://user:pw@console.localhost/',
        'http://my-project.localhost/',
        'http://lambda.localhost/',
        'http://api.localhost/',
        'http://localhost/',
        'relative/path',
        '/ok\npath',
        `/${'a'.repeat(2100)}`,
      ]) {
        const response = await get(service, `/v0/sso/test/login?redirect=${encodeURIComponent(bad)}`);
        assertError(response, 400, 'validation_error');
      }
      assert.equal(await countRows(service.store.sql, 'auth_sso_states'), states);
    });

    test('unknown provider → 404 not_found; unreachable discovery → 502 provider_error', async () => {
      assertError(await get(service, '/v0/sso/nope/login'), 404, 'not_found');
      const message = assertError(await get(service, '/v0/sso/down/login'), 502, 'provider_error');
      assert.ok(!message.includes('down-secret'));
    });

    test('discovery is fetched once for many logins', async () => {
      await startLogin(service);
      const count = idp.requests.filter((p) => p === '/.well-known/openid-configuration').length;
      await startLogin(service);
      await startLogin(service);
      assert.equal(idp.requests.filter((p) => p === '/.well-known/openid-configuration').length, count);
    });
  });

  describe('GET /v0/sso/{provider}/callback', () => {
    test('full code flow: 302 to the redirect target with a session cookie for the linked user', async () => {
      const target = 'http://console.localhost/projects?tab=1';
      const callback = await signInAt(service, 'alice', {
        query: `?redirect=${encodeURIComponent(target)}&code_challenge=${CHALLENGE}`,
      });
      assert.match(callback, /^\/v0\/sso\/test\/callback\?code=[^&]+&state=[^&]+&iss=/);
      const states = await countRows(service.store.sql, 'auth_sso_states');
      const response = await get(service, callback);
      assert.equal(response.statusCode, 302, response.body);
      const back = splitCode(response.headers.location);
      assert.equal(back.target, target);
      assert.equal(response.headers['cache-control'], 'no-store');
      const cookie = setCookieOf(response);
      assert.match(
        cookie,
        /^stratus_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; Secure; SameSite=Lax; Max-Age=604800$/,
      );
      const found = await findSessionByToken(service.store.sql, tokenFromCookie(cookie));
      assert.ok(found, 'the cookie is a live session');
      assert.match(found.user.id, USER_ID);
      assert.equal(found.user.email, 'alice@example.com');
      assert.equal(found.user.nick, 'Alice Liddell');
      assert.equal(found.user.picture, 'https://example.com/alice.png');
      assert.equal((await findUserByIdentity(service.store.sql, 'test', 'alice'))?.id, found.user.id);
      assert.equal(await countRows(service.store.sql, 'auth_sso_states'), states - 1);

      // The session works for /v0/me as the gateway would present it.
      const me = await service.app.inject({
        method: 'GET',
        url: '/v0/me',
        headers: {
          host: HOST,
          'x-gateway-authentication': JSON.stringify({
            user: { id: found.user.id },
            session: { id: found.session.id },
            auth: { method: 'session' },
          }),
        },
      });
      assert.equal(me.statusCode, 200);
      assert.equal((me.json() as { email: string }).email, 'alice@example.com');

      // The one-time code in the redirect buys the web console (which holds the verifier) a bearer
      // session of its own, once.
      const exchange = () =>
        service.app.inject({
          method: 'POST',
          url: '/v0/session/token',
          headers: { host: HOST, 'content-type': 'application/json' },
          payload: { code: back.code, code_verifier: VERIFIER },
        });
      const traded = await exchange();
      assert.equal(traded.statusCode, 200, traded.body);
      assert.equal(
        (await findSessionByToken(service.store.sql, traded.json<{ token: string }>().token))?.user.id,
        found.user.id,
      );
      assert.equal((await exchange()).statusCode, 401, 'a code works once');

      // Signing in again reaches the same user.
      const second = await get(service, await signInAt(service, 'alice'));
      assert.equal(second.statusCode, 302);
      assert.equal(
        (await findSessionByToken(service.store.sql, tokenFromCookie(setCookieOf(second))))?.user.id,
        found.user.id,
      );
    });

    test('default target is the console; a path goes to the console host; the port is kept', async () => {
      const bound = `code_challenge=${CHALLENGE}`;
      assert.equal(
        splitCode((await get(service, await signInAt(service, 'alice', { query: `?${bound}` }))).headers.location)
          .target,
        'http://console.localhost/',
      );
      assert.equal(
        splitCode(
          (await get(service, await signInAt(service, 'alice', { query: `?redirect=/dash%3Fa%3D1&${bound}` }))).headers
            .location,
        ).target,
        'http://console.localhost/dash?a=1',
      );
      // A project host serves user code: never a target (issue 17).
      assertError(
        await get(service, '/v0/sso/test/login?redirect=https%3A%2F%2Fmy-project.localhost%2Fx'),
        400,
        'validation_error',
      );
      const login = await get(service, `/v0/sso/test/login?${bound}`, { host: 'auth.localhost:8080' });
      const back = await idp.authorize(String(login.headers.location), { account: 'alice' });
      assert.equal(back.origin, 'http://auth.localhost:8080');
      const response = await get(service, back.pathname + back.search, { host: 'auth.localhost:8080' });
      assert.equal(response.statusCode, 302, response.body);
      assert.equal(splitCode(response.headers.location).target, 'http://console.localhost:8080/');
    });

    test('works with a client_secret_post provider', async () => {
      const response = await get(service, await signInAt(service, 'carol', { provider: other, name: 'other' }));
      assert.equal(response.statusCode, 302, response.body);
      const found = await findSessionByToken(service.store.sql, tokenFromCookie(setCookieOf(response)));
      assert.equal(found?.user.email, 'carol@example.com');
      assert.equal(found?.user.nick, 'carol');
    });

    test('a state is single use: replaying the callback → 400 invalid_state', async () => {
      const callback = await signInAt(service, 'alice');
      assert.equal((await get(service, callback)).statusCode, 302);
      const replay = await get(service, callback);
      assertError(replay, 400, 'invalid_state');
      assert.equal(replay.headers['set-cookie'], undefined);
    });

    test('unknown, tampered, missing, expired or other-provider state → 400 invalid_state', async () => {
      const callback = new URL(await signInAt(service, 'alice'), 'http://auth.localhost');
      const state = callback.searchParams.get('state') ?? '';
      const tampered = new URL(callback);
      tampered.searchParams.set('state', `${state.slice(0, -1)}${state.endsWith('A') ? 'B' : 'A'}`);
      assertError(await get(service, tampered.pathname + tampered.search), 400, 'invalid_state');
      const missing = new URL(callback);
      missing.searchParams.delete('state');
      assertError(await get(service, missing.pathname + missing.search), 400, 'invalid_state');
      // The untampered one still works: a bad guess does not burn the real state.
      assert.equal((await get(service, callback.pathname + callback.search)).statusCode, 302);

      await saveSsoState(service.store.sql, {
        state: 'expired-state-0123456789',
        provider: 'test',
        nonce: 'n',
        verifier: 'v',
        redirect: 'http://console.localhost/',
        expiresAt: Date.now() - 1,
      });
      assertError(
        await get(service, '/v0/sso/test/callback?code=abc&state=expired-state-0123456789'),
        400,
        'invalid_state',
      );

      const foreign = new URL(await signInAt(service, 'alice'), 'http://auth.localhost');
      assertError(await get(service, `/v0/sso/other/callback${foreign.search}`), 400, 'invalid_state');
    });

    test('provider error → 401 unauthorized, and the state is used up', async () => {
      const location = await startLogin(service);
      const back = await idp.authorize(location.href, { deny: true });
      assert.equal(back.searchParams.get('error'), 'access_denied');
      const message = assertError(await get(service, back.pathname + back.search), 401, 'unauthorized');
      assert.match(message, /access_denied/);
      const withCode = new URL(back);
      withCode.searchParams.delete('error');
      withCode.searchParams.set('code', 'whatever');
      assertError(await get(service, withCode.pathname + withCode.search), 400, 'invalid_state');
    });

    test('a provider error without a valid state is still 400 invalid_state', async () => {
      assertError(await get(service, '/v0/sso/test/callback?error=access_denied&state=nope'), 400, 'invalid_state');
    });

    test('an ID token with another nonce → 401 invalid_token, no session', async () => {
      const sessions = await countRows(service.store.sql, 'auth_sessions');
      const callback = await signInAt(service, 'alice', {
        tamper: (location) => location.searchParams.set('nonce', 'attacker-chosen-nonce'),
      });
      const message = assertError(await get(service, callback), 401, 'invalid_token');
      assert.match(message, /nonce/);
      assert.equal(await countRows(service.store.sql, 'auth_sessions'), sessions);
    });

    test('PKCE is enforced: a challenge that does not match the stored verifier → 502 provider_error', async () => {
      const callback = await signInAt(service, 'alice', {
        tamper: (location) =>
          location.searchParams.set(
            'code_challenge',
            createHash('sha256').update('another verifier').digest('base64url'),
          ),
      });
      const message = assertError(await get(service, callback), 502, 'provider_error');
      assert.match(message, /invalid_grant/);
      assert.ok(!message.includes(idp.clientSecret));
    });

    test('a bad code → 502 provider_error; no code → 400; a foreign iss → 401', async () => {
      const callback = new URL(await signInAt(service, 'alice'), 'http://auth.localhost');
      callback.searchParams.set('code', 'not-a-real-code');
      assertError(await get(service, callback.pathname + callback.search), 502, 'provider_error');

      const noCode = new URL(await signInAt(service, 'alice'), 'http://auth.localhost');
      noCode.searchParams.delete('code');
      assertError(await get(service, noCode.pathname + noCode.search), 400, 'validation_error');

      const mixUp = new URL(await signInAt(service, 'alice'), 'http://auth.localhost');
      mixUp.searchParams.set('iss', other.issuer);
      assertError(await get(service, mixUp.pathname + mixUp.search), 401, 'unauthorized');
    });

    test('unverified email of an existing user → 403; a new subject with signup closed → 403', async () => {
      await createUser(service.store.sql, { email: 'bob@example.com', password: 'correct horse battery' });
      const message = assertError(await get(service, await signInAt(service, 'bob')), 403, 'forbidden');
      assert.match(message, /verified/);
      assert.equal(await findUserByIdentity(service.store.sql, 'test', 'bob'), null);

      const users = await countRows(closed.store.sql, 'auth_users');
      const refused = await get(closed, await signInAt(closed, 'carol'));
      assert.match(assertError(refused, 403, 'forbidden'), /no account for this identity; sign-up is closed/);
      assert.equal(refused.headers['set-cookie'], undefined);
      assert.equal(await countRows(closed.store.sql, 'auth_users'), users);
    });

    test('signup closed: a verified email links to the existing user', async () => {
      const existing = await createUser(closed.store.sql, {
        email: 'alice@example.com',
        password: 'correct horse battery',
        nick: 'al',
      });
      const response = await get(closed, await signInAt(closed, 'alice'));
      assert.equal(response.statusCode, 302, response.body);
      const found = await findSessionByToken(closed.store.sql, tokenFromCookie(setCookieOf(response)));
      assert.equal(found?.user.id, existing.id);
      assert.equal(found?.user.nick, 'al');
      assert.equal(found?.user.picture, 'https://example.com/alice.png');
    });

    test('unknown provider → 404; unreachable provider → 502 (the state is then used up)', async () => {
      assertError(await get(service, '/v0/sso/nope/callback?code=a&state=b'), 404, 'not_found');
      await saveSsoState(service.store.sql, {
        state: 'down-state-0123456789',
        provider: 'down',
        nonce: 'n',
        verifier: 'v',
        redirect: 'http://console.localhost/',
        expiresAt: Date.now() + 60_000,
      });
      assertError(
        await get(service, '/v0/sso/down/callback?code=a&state=down-state-0123456789'),
        502,
        'provider_error',
      );
      assertError(await get(service, '/v0/sso/down/callback?code=a&state=down-state-0123456789'), 400, 'invalid_state');
    });
  });

  describe('POST /v0/sso/{provider}/token', () => {
    test('a provider-issued ID token signs in: 200 login shape + cookie', async () => {
      const idToken = await idp.obtainIdToken('carol', { nonce: 'whatever-the-console-chose' });
      const response = await postToken(service, 'test', { id_token: idToken });
      assert.equal(response.statusCode, 200, response.body);
      assert.equal(response.headers['cache-control'], 'no-store');
      const body = response.json() as LoginBody;
      assert.deepEqual(Object.keys(body), ['user', 'token']);
      assert.match(body.user.id, USER_ID);
      assert.deepEqual(body.user, { id: body.user.id, nick: 'carol', email: 'carol@example.com' });
      assert.equal(tokenFromCookie(setCookieOf(response)), body.token);
      const found = await findSessionByToken(service.store.sql, body.token);
      assert.equal(found?.user.id, body.user.id);
      // Same identity again → same user, new session.
      const again = (
        await postToken(service, 'test', { id_token: await idp.signIdToken({ sub: 'carol' }) })
      ).json() as LoginBody;
      assert.equal(again.user.id, body.user.id);
      assert.notEqual(again.token, body.token);
    });

    test('body errors: invalid_json, validation_error (missing, wrong type, empty, unknown field)', async () => {
      assertError(await postToken(service, 'test', '{"id_token":'), 400, 'invalid_json');
      assertError(await postToken(service, 'test', {}), 400, 'validation_error');
      assertError(await postToken(service, 'test', { id_token: 42 }), 400, 'validation_error');
      assertError(await postToken(service, 'test', { id_token: '' }), 400, 'validation_error');
      const idToken = await idp.signIdToken({ sub: 'carol' });
      assert.match(
        assertError(await postToken(service, 'test', { id_token: idToken, extra: 1 }), 400, 'validation_error'),
        /extra/,
      );
      assertError(await postToken(service, 'test', '[]'), 400, 'validation_error');
    });

    test('rejected tokens → 401 invalid_token, without echoing the token', async () => {
      const t = Math.floor(Date.now() / 1000);
      const claims = { iss: idp.issuer, aud: idp.clientId, sub: 'carol', iat: t, exp: t + 600 };
      const { privateKey: strangerKey } = await generateKeyPair('RS256');
      const cases: Record<string, string> = {
        'another issuer': await new SignJWT({ ...claims, iss: 'https://elsewhere.example' })
          .setProtectedHeader({ alg: 'RS256' })
          .sign(strangerKey),
        'another configured issuer': await other.signIdToken({ sub: 'carol' }),
        'alg none': new UnsecuredJWT(claims).encode(),
        'HS256 with the client secret': await new SignJWT(claims)
          .setProtectedHeader({ alg: 'HS256' })
          .sign(new TextEncoder().encode(idp.clientSecret)),
        'wrong audience': await idp.signIdToken({ aud: 'someone-else' }),
        expired: await idp.signIdToken({ iat: t - 7200, exp: t - 3600 }),
        'not yet valid': await idp.signIdToken({ nbf: t + 3600 }),
        'foreign key': await idp.signIdToken({}, { key: strangerKey }),
        'not a JWT': 'pB3v9Yk0cQ2m7xN4s8TzW1eR6uJ5hL0a',
      };
      const sessions = await countRows(service.store.sql, 'auth_sessions');
      for (const [name, token] of Object.entries(cases)) {
        const response = await postToken(service, 'test', { id_token: token });
        const message = assertError(response, 401, 'invalid_token');
        assert.ok(!message.includes(token), `${name}: message echoes the token`);
        assert.equal(response.headers['set-cookie'], undefined, name);
      }
      assert.equal(await countRows(service.store.sql, 'auth_sessions'), sessions);
    });

    test('unknown provider → 404 (before the body is read); unreachable provider → 502', async () => {
      assertError(await postToken(service, 'nope', { id_token: 'x' }), 404, 'not_found');
      assertError(await postToken(service, 'nope', '{bad json'), 404, 'not_found');
      const token = await new SignJWT({ iss: downIssuer, aud: 'down-client', sub: 's' })
        .setProtectedHeader({ alg: 'RS256' })
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign((await generateKeyPair('RS256')).privateKey);
      assertError(await postToken(service, 'down', { id_token: token }), 502, 'provider_error');
    });

    test('linking rules: verified email links, unverified does not, closed signup refuses new subjects', async () => {
      const existing = await createUser(service.store.sql, {
        email: 'dave@example.com',
        password: 'correct horse battery',
      });
      const unverified = await postToken(service, 'test', {
        id_token: await idp.signIdToken({ sub: 'dave-1', email: 'dave@example.com', email_verified: false }),
      });
      assertError(unverified, 403, 'forbidden');
      const verified = await postToken(service, 'test', {
        id_token: await idp.signIdToken({
          sub: 'dave-2',
          email: 'Dave@Example.com',
          email_verified: true,
          name: 'Dave',
        }),
      });
      assert.equal(verified.statusCode, 200, verified.body);
      assert.deepEqual((verified.json() as LoginBody).user, {
        id: existing.id,
        nick: 'Dave',
        email: 'dave@example.com',
      });

      const refused = await postToken(closed, 'test', {
        id_token: await idp.signIdToken({ sub: 'erin', email: 'erin@example.com', email_verified: true }),
      });
      assert.match(assertError(refused, 403, 'forbidden'), /sign-up is closed/);
      const created = await postToken(service, 'test', {
        id_token: await idp.signIdToken({ sub: 'erin', email: 'erin@example.com', email_verified: true }),
      });
      assert.equal(created.statusCode, 200);
      assert.deepEqual((created.json() as LoginBody).user, {
        id: (created.json() as LoginBody).user.id,
        email: 'erin@example.com',
      });

      const noEmail = await postToken(service, 'test', { id_token: await idp.signIdToken({ sub: 'frank' }) });
      assertError(noEmail, 403, 'forbidden');
    });
  });

  test('the OpenAPI document lists the three routes', async () => {
    const response = await service.app.inject({ method: 'GET', url: '/openapi.json', headers: { host: HOST } });
    const doc = response.json() as {
      paths: Record<string, Record<string, { summary?: string; responses: Record<string, unknown> }>>;
    };
    assert.ok(doc.paths['/v0/sso/{provider}/login']?.get?.summary);
    assert.ok(doc.paths['/v0/sso/{provider}/login']?.get?.responses['302']);
    assert.ok(doc.paths['/v0/sso/{provider}/callback']?.get?.responses['302']);
    assert.ok(doc.paths['/v0/sso/{provider}/token']?.post?.responses['200']);
  });

  test('wrong methods → 405; HEAD neither creates nor spends a state', async () => {
    const response = await service.app.inject({ method: 'POST', url: '/v0/sso/test/login', headers: { host: HOST } });
    assertError(response as LightMyRequestResponse, 405, 'method_not_allowed');
    const states = await countRows(service.store.sql, 'auth_sso_states');
    const head = await service.app.inject({ method: 'HEAD', url: '/v0/sso/test/login', headers: { host: HOST } });
    assert.equal(head.statusCode, 405);
    assert.equal(await countRows(service.store.sql, 'auth_sso_states'), states);
    const callback = await signInAt(service, 'alice');
    assert.equal(
      (await service.app.inject({ method: 'HEAD', url: callback, headers: { host: HOST } })).statusCode,
      405,
    );
    assert.equal((await get(service, callback)).statusCode, 302);
  });
});
