import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import pino from 'pino';
import { SettingsError, loadSettings } from '../../../src/config.ts';
import { VERSION } from '../../../src/core/version.ts';
import { authService } from '../../../src/services/auth/index.ts';
import {
  SSO_CODE_TTL_MS,
  createSession,
  createSsoCode,
  createUser,
  deleteSession,
  findSessionByToken,
} from '../../../src/services/auth/repository.ts';
import { all, first } from '../../../src/store/sql-work.ts';
import { startTestIdp, type TestIdp } from '../../helpers/oidc-provider.ts';
import { startTestPlatform, type TestPlatform } from '../../helpers/platform.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';
import { assertError, countRows } from './helpers.ts';

// Issue 17, items 2 and 15: the single sign-on hand-over (`sso_code`) goes only to the console or an
// allow-listed origin, is bound to the browser that started the sign-in (a PKCE-style verifier the
// console keeps), lives 60 s and works once; `POST /v0/session/token` also trades a bearer session.

const HOST = 'auth.localhost';
const ALLOWED = 'https://app.example.org';

const b64url = (bytes: Buffer) => bytes.toString('base64url');
/** A console's binding: the verifier it keeps and the S256 challenge it sends to /login. */
function binding(): { verifier: string; challenge: string } {
  const verifier = b64url(randomBytes(32));
  return { verifier, challenge: b64url(createHash('sha256').update(verifier).digest()) };
}

async function codeRows(service: TestService): Promise<number> {
  const row = await service.store.sql.database.read(() =>
    first<{ n: number | string }>('select count(*) as n from auth_sso_codes'),
  );
  return Number(row?.n);
}

describe('single sign-on hand-over', { timeout: 120_000 }, () => {
  let idp: TestIdp;
  let service: TestService;

  before(async () => {
    idp = await startTestIdp({
      accounts: [{ sub: 'alice', email: 'alice@example.com', email_verified: true, name: 'Alice' }],
    });
    service = await startTestService(authService, {
      authProviders: [{ name: 'test', issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret }],
      signup: 'open',
      ssoRedirectOrigins: [ALLOWED, 'http://127.0.0.1:5173'],
    });
  });
  after(async () => {
    await service?.close();
    await idp?.close();
  });

  const get = (url: string, headers: Record<string, string> = {}) =>
    service.app.inject({ method: 'GET', url, headers: { host: HOST, ...headers } });
  const exchange = (body: unknown, headers: Record<string, string> = {}) =>
    service.app.inject({
      method: 'POST',
      url: '/v0/session/token',
      headers: { host: HOST, 'content-type': 'application/json', ...headers },
      payload: JSON.stringify(body),
    });

  /** A whole sign-in through the test IdP: the callback's answer. */
  async function signIn(query: Record<string, string>, headers: Record<string, string> = {}) {
    const login = await get(`/v0/sso/test/login?${new URLSearchParams(query).toString()}`, headers);
    assert.equal(login.statusCode, 302, login.body);
    const back = await idp.authorize(String(login.headers.location), { account: 'alice' });
    const callback = await get(back.pathname + back.search, headers);
    assert.equal(callback.statusCode, 302, callback.body);
    return new URL(String(callback.headers.location));
  }

  /** A sign-in started with a binding: the code that came back and the verifier that goes with it. */
  async function codeFor(redirect = '/'): Promise<{ code: string; verifier: string; target: URL }> {
    const { verifier, challenge } = binding();
    const target = await signIn({ redirect, code_challenge: challenge });
    const code = target.searchParams.get('sso_code');
    assert.match(code ?? '', /^[A-Za-z0-9_-]{43}$/);
    return { code: code ?? '', verifier, target };
  }

  describe('redirect targets', () => {
    test('hosts that serve user code, other platform hosts and other origins are refused before the provider is involved', async () => {
      const states = await countRows(service.store.sql, 'auth_sso_states');
      const discoveries = idp.requests.length;
      for (const bad of [
        'http://my-project.localhost/',
        'http://my-project.localhost/?x=1',
        'http://lambda.localhost/run/x',
        'http://api.localhost/',
        'http://localhost/',
        'http://files.localhost/v1/buckets/b/files/page.html',
        'http://auth.localhost/',
        'http://docdb.localhost/',
        'https://console.localhost/', // another scheme than the request's
        'http://console.localhost:9999/', // another port
        'http://console.localhost./',
        'https://evil.example/',
        'https://app.example.org.evil.example/',
        'https://app.example.org:8443/',
        'http://app.example.org/',
        'https://sub.app.example.org/',
        'http://127.0.0.1:5174/',
        'http://localhost:5173/',
      ]) {
        const response = await get(`/v0/sso/test/login?redirect=${encodeURIComponent(bad)}`);
        const message = assertError(response, 400, 'validation_error');
        assert.equal(response.headers.location, undefined, bad);
        assert.match(message, /console/, bad);
        assert.match(message, /SSO_REDIRECT_ORIGINS/, bad);
      }
      assert.equal(await countRows(service.store.sql, 'auth_sso_states'), states, 'no state stored');
      assert.equal(idp.requests.length, discoveries, 'the provider is not contacted');
    });

    test('the console (path or its exact origin) and allow-listed origins are accepted', async () => {
      for (const [redirect, target] of [
        ['', 'http://console.localhost/'],
        ['/projects?tab=1', 'http://console.localhost/projects?tab=1'],
        ['http://console.localhost/dash', 'http://console.localhost/dash'],
        ['http://CONSOLE.localhost:80/x', 'http://console.localhost/x'],
        [`${ALLOWED}/signed-in?x=1`, `${ALLOWED}/signed-in?x=1`],
        ['HTTPS://App.Example.Org:443/', `${ALLOWED}/`],
        ['http://127.0.0.1:5173/', 'http://127.0.0.1:5173/'],
      ] as const) {
        const { challenge } = binding();
        const query: Record<string, string> = { code_challenge: challenge };
        if (redirect !== '') query.redirect = redirect;
        const back = await signIn(query);
        const code = back.searchParams.get('sso_code');
        assert.ok(code, redirect);
        back.searchParams.delete('sso_code');
        assert.equal(back.href, target, redirect);
      }
    });

    test('the console origin keeps the scheme and port the browser used', async () => {
      const headers = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'auth.localhost:8443' };
      assert.equal(
        (await get(`/v0/sso/test/login?redirect=${encodeURIComponent('https://console.localhost:8443/x')}`, headers))
          .statusCode,
        302,
      );
      assertError(
        await get(`/v0/sso/test/login?redirect=${encodeURIComponent('http://console.localhost/x')}`, headers),
        400,
        'validation_error',
      );
      assertError(
        await get(`/v0/sso/test/login?redirect=${encodeURIComponent('https://console.localhost/x')}`, headers),
        400,
        'validation_error',
      );
    });

    test('the setting: SSO_REDIRECT_ORIGINS is a comma-separated list of exact origins', () => {
      const dir = service.database.dataDir;
      assert.deepEqual(loadSettings({}, {}, dir).ssoRedirectOrigins, []);
      assert.deepEqual(
        loadSettings(
          {},
          { SSO_REDIRECT_ORIGINS: ' https://App.Example.org , http://localhost:5173/,https://x.test:8443' },
          dir,
        ).ssoRedirectOrigins,
        ['https://app.example.org', 'http://localhost:5173', 'https://x.test:8443'],
      );
      for (const bad of [
        '*.example.org',
        'https://*.example.org',
        'https://x.org/path',
        'https://x.org/?q',
        'https://x.org/#f',
        'ftp://x.org',
        'https://user@x.org',
        'null',
        'x.org',
      ]) {
        assert.throws(() => loadSettings({}, { SSO_REDIRECT_ORIGINS: bad }, dir), SettingsError, bad);
      }
    });

    test('origins on the platform domain other than the console cannot be allow-listed', async () => {
      // The service refuses to build (the platform exits at start with the message).
      const build = (origins: string[]) =>
        authService.build({
          settings: { ...service.settings, ssoRedirectOrigins: origins },
          store: service.store,
          logger: pino({ level: 'silent' }),
          version: VERSION,
        });
      for (const origin of [
        'http://my-project.localhost',
        'http://lambda.localhost',
        'http://localhost',
        'http://localhost:5173',
        'http://api.localhost:8080',
        'https://auth.localhost',
      ]) {
        await assert.rejects(
          build([origin]),
          (error: unknown) => error instanceof SettingsError && error.message.includes(origin),
          origin,
        );
      }
      const ok = await build(['http://console.localhost:5173']);
      await ok.close();
    });
  });

  describe('the one-time code', () => {
    test('is bound to the browser that started the sign-in: accepted once with its verifier', async () => {
      const { code, verifier } = await codeFor();
      const first = await exchange({ code, code_verifier: verifier });
      assert.equal(first.statusCode, 200, first.body);
      assert.equal(first.headers['cache-control'], 'no-store');
      const found = await findSessionByToken(service.store.sql, first.json<{ token: string }>().token);
      assert.equal(found?.user.email, 'alice@example.com');
      assertError(await exchange({ code, code_verifier: verifier }), 401, 'unauthorized');
    });

    test('presented without the binding (another browser): 401, and the code is burned', async () => {
      const { code, verifier } = await codeFor();
      const message = assertError(await exchange({ code }), 401, 'unauthorized');
      assert.ok(!message.includes(code));
      assertError(await exchange({ code, code_verifier: verifier }), 401, 'unauthorized');
    });

    test('presented with another verifier: 401, and the code is burned', async () => {
      const { code, verifier } = await codeFor();
      assertError(await exchange({ code, code_verifier: binding().verifier }), 401, 'unauthorized');
      assertError(await exchange({ code, code_verifier: verifier }), 401, 'unauthorized');
    });

    test('the code that reaches an allow-listed origin is bound too', async () => {
      const { code, verifier, target } = await codeFor(`${ALLOWED}/cb`);
      assert.equal(target.origin, ALLOWED);
      assertError(await exchange({ code }), 401, 'unauthorized');
      assertError(await exchange({ code, code_verifier: verifier }), 401, 'unauthorized');
    });

    test('only a sign-in started with a challenge gets a code; a bad challenge is a 400', async () => {
      const codes = await codeRows(service);
      const back = await signIn({ redirect: '/' });
      assert.equal(back.searchParams.get('sso_code'), null);
      assert.equal(back.href, 'http://console.localhost/');
      assert.equal(await codeRows(service), codes);

      const states = await countRows(service.store.sql, 'auth_sso_states');
      const badQueries: Record<string, string>[] = [
        { code_challenge: 'short' },
        { code_challenge: `${binding().challenge.slice(0, 42)}+` },
        { code_challenge: `${binding().challenge}A` },
        { code_challenge: binding().challenge, code_challenge_method: 'plain' },
        { code_challenge_method: 'S256' },
      ];
      for (const query of badQueries) {
        assertError(await get(`/v0/sso/test/login?${new URLSearchParams(query).toString()}`), 400, 'validation_error');
      }
      assert.equal(await countRows(service.store.sql, 'auth_sso_states'), states);
      assert.equal(
        (await get(`/v0/sso/test/login?code_challenge=${binding().challenge}&code_challenge_method=S256`)).statusCode,
        302,
      );
    });

    test('a malformed verifier is a 400 that burns nothing', async () => {
      const { code, verifier } = await codeFor();
      for (const bad of [5, '', 'short', 'x'.repeat(129), `${verifier.slice(0, 42)} `]) {
        assertError(await exchange({ code, code_verifier: bad }), 400, 'validation_error');
      }
      assertError(await exchange({ code, code_verifier: verifier, more: 1 }), 400, 'validation_error');
      assert.equal((await exchange({ code, code_verifier: verifier })).statusCode, 200);
    });

    test('lives 60 s: the callback stores it hashed with its challenge, and an expired one is refused and burned', async () => {
      const before = Date.now();
      const { code, verifier } = await codeFor();
      const rows = await service.store.sql.database.read(() =>
        all<{ code_hash: string; expires_at: number | string; challenge: string }>('select * from auth_sso_codes'),
      );
      const row = rows.find((r) => r.code_hash === createHash('sha256').update(code).digest('hex'));
      assert.ok(row, 'stored as its SHA-256');
      assert.ok(
        !JSON.stringify(rows).includes(code) && !JSON.stringify(rows).includes(verifier),
        'neither the code nor the verifier is stored',
      );
      assert.equal(row.challenge, b64url(createHash('sha256').update(verifier).digest()));
      const expiresAt = Number(row.expires_at);
      assert.ok(
        expiresAt >= before + SSO_CODE_TTL_MS && expiresAt <= Date.now() + SSO_CODE_TTL_MS,
        `expires_at ${expiresAt}`,
      );
      assert.equal(SSO_CODE_TTL_MS, 60_000);

      // A code made 61 s ago (the repository takes the clock as an argument).
      const user = await createUser(service.store.sql, { email: `old-${randomBytes(4).toString('hex')}@example.com` });
      const old = binding();
      const codes = await codeRows(service);
      const expired = await createSsoCode(
        service.store.sql,
        user.id,
        old.challenge,
        Date.now() - SSO_CODE_TTL_MS - 1000,
      );
      assert.equal(await codeRows(service), codes + 1);
      assertError(await exchange({ code: expired, code_verifier: old.verifier }), 401, 'unauthorized');
      assert.equal(await codeRows(service), codes, 'the expired code is gone');
      // One made 59 s ago still works.
      const fresh = await createSsoCode(service.store.sql, user.id, old.challenge, Date.now() - SSO_CODE_TTL_MS + 1000);
      assert.equal((await exchange({ code: fresh, code_verifier: old.verifier })).statusCode, 200);
    });

    test('concurrent exchanges of one code: exactly one wins', async () => {
      const { code, verifier } = await codeFor();
      const answers = await Promise.all(Array.from({ length: 5 }, () => exchange({ code, code_verifier: verifier })));
      assert.deepEqual(answers.map((a) => a.statusCode).sort(), [200, 401, 401, 401, 401]);
    });
  });

  describe("POST /v0/session/token with the caller's session", () => {
    test('a bearer session is traded for a new bearer session of the same user', async () => {
      const user = await createUser(service.store.sql, {
        email: `bearer-${randomBytes(4).toString('hex')}@example.com`,
      });
      const current = await createSession(service.store.sql, user.id);
      const response = await service.app.inject({
        method: 'POST',
        url: '/v0/session/token',
        headers: asUser(user.id, { session: { id: current.session.id }, auth: { method: 'bearer' } }),
      });
      assert.equal(response.statusCode, 200, response.body);
      assert.equal(response.headers['set-cookie'], undefined);
      const body = response.json<{ token: string; expires_at: string }>();
      assert.notEqual(body.token, current.token);
      assert.equal((await findSessionByToken(service.store.sql, body.token))?.user.id, user.id);
      assert.ok(await findSessionByToken(service.store.sql, current.token), 'the old session stays');
    });

    test('API keys, provider JWTs and ended sessions are refused', async () => {
      const user = await createUser(service.store.sql, {
        email: `refused-${randomBytes(4).toString('hex')}@example.com`,
      });
      const post = (identity: Record<string, unknown>) =>
        service.app.inject({ method: 'POST', url: '/v0/session/token', headers: asUser(user.id, identity) });
      assertError(await post({ auth: { method: 'api_key', key: 'k' } }), 403, 'forbidden');
      assertError(await post({ auth: { method: 'bearer' } }), 403, 'forbidden');
      const ended = await createSession(service.store.sql, user.id);
      await deleteSession(service.store.sql, ended.session.id);
      assertError(await post({ session: { id: ended.session.id }, auth: { method: 'bearer' } }), 401, 'unauthorized');
      // A session of another user cannot be borrowed by naming it.
      const other = await createUser(service.store.sql, {
        email: `other-${randomBytes(4).toString('hex')}@example.com`,
      });
      const theirs = await createSession(service.store.sql, other.id);
      assertError(await post({ session: { id: theirs.session.id }, auth: { method: 'session' } }), 401, 'unauthorized');
    });
  });
});

describe('POST /v0/session/token through the gateway', { timeout: 120_000 }, () => {
  let t: TestPlatform;
  const email = 'gateway-admin@example.com';
  const password = 'a long enough password';

  before(async () => {
    t = await startTestPlatform({ adminEmail: email, adminPassword: password, cookieSecure: false });
  });
  after(async () => {
    await t?.close();
  });

  const json = { 'content-type': 'application/json' };

  test('Authorization: Bearer <session token> buys a new bearer session; an API key does not', async () => {
    const login = await t.call({
      method: 'POST',
      host: 'auth.localhost',
      path: '/v0/login',
      headers: json,
      body: JSON.stringify({ email, password }),
    });
    assert.equal(login.status, 200, login.text);
    const { token, user } = login.json<{ token: string; user: { id: string } }>();

    const traded = await t.call({
      method: 'POST',
      host: 'auth.localhost',
      path: '/v0/session/token',
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(traded.status, 200, traded.text);
    const fresh = traded.json<{ token: string }>().token;
    assert.notEqual(fresh, token);
    const me = await t.call({ host: 'auth.localhost', path: '/v0/me', headers: { authorization: `Bearer ${fresh}` } });
    assert.equal(me.json<{ id: string }>().id, user.id);

    const key = await t.call({
      method: 'POST',
      host: 'apikeys.localhost',
      path: '/v0/apikeys',
      headers: { ...json, authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: 'ci' }),
    });
    assert.equal(key.status, 201, key.text);
    const { key: apiKey, secret } = key.json<{ key: string; secret: string }>();
    const refused = await t.call({
      method: 'POST',
      host: 'auth.localhost',
      path: '/v0/session/token',
      headers: { 'api-key': apiKey, 'api-secret': secret },
    });
    assert.equal(refused.status, 403, refused.text);
    const basic = await t.call({
      method: 'POST',
      host: 'auth.localhost',
      path: '/v0/session/token',
      headers: { authorization: `Basic ${Buffer.from(`${apiKey}:${secret}`).toString('base64')}` },
    });
    assert.equal(basic.status, 403, basic.text);
    assert.equal((await t.call({ method: 'POST', host: 'auth.localhost', path: '/v0/session/token' })).status, 401);
  });
});
