import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { extendSession, findSessionByToken, type User } from '../../src/services/auth/repository.ts';
import { CredentialGuard, SharedFailureCounts } from '../../src/gateway/guard.ts';
import { authService } from '../../src/services/auth/index.ts';
import { migrate } from '../../src/store/migrate.ts';
import { all } from '../../src/store/sql-work.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { asUser } from '../helpers/service.ts';
import { credentialedOrigins } from '../../src/gateway/origins.ts';
import { startHarness, type Harness } from './harness.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
type Identity = {
  user: { id: string; email?: string; nick?: string };
  auth: { method: string; key?: string; host_metadata?: string };
  session?: { id: string };
  project?: { id: string; slug: string };
};

describe('gateway authentication (gateway.md §3, apikeys.md §2.3)', () => {
  let h: Harness;
  let ada: User;
  let key: { key: string; secret: string };

  before(async () => {
    h = await startHarness();
    ada = await h.user('ada@example.com');
    key = await h.createKey(ada, { name: 'plain' });
  });
  after(async () => {
    await h.close();
  });

  const identityOf = (headers: Record<string, string>) => {
    const raw = headers['x-gateway-authentication'];
    return raw === undefined ? undefined : (JSON.parse(raw) as Identity);
  };
  const basic = (k: string, s: string) => `Basic ${Buffer.from(`${k}:${s}`).toString('base64')}`;

  describe('API keys', () => {
    it('injects the key owner as identity and removes the key headers', async () => {
      const res = await h.call({ path: '/v1/anything', headers: { 'api-key': key.key, 'api-secret': key.secret } });
      assert.equal(res.status, 200);
      const seen = h.seen(res);
      const identity = identityOf(seen.headers);
      assert.deepEqual(identity, {
        user: { id: ada.id, nick: 'ada', email: 'ada@example.com' },
        auth: { method: 'api_key', key: key.key },
      });
      assert.equal(seen.headers['api-key'], undefined);
      assert.equal(seen.headers['api-secret'], undefined);
      assert.ok(!seen.rawHeaders.includes(key.secret), 'the secret never reaches a backend');
    });

    it('rejects a known key with a wrong secret on an optional route, and does not cache it', async () => {
      const before = h.keys.verifications;
      const wrong = await h.call({
        path: '/x',
        headers: { 'api-key': key.key, 'api-secret': '00000000-0000-4000-8000-000000000000' },
      });
      assert.equal(wrong.status, 401);
      assert.equal(wrong.json<{ error: { code: string } }>().error.code, 'unauthorized');
      const again = await h.call({
        path: '/x',
        headers: { 'api-key': key.key, 'api-secret': '00000000-0000-4000-8000-000000000000' },
      });
      assert.equal(again.status, 401);
      assert.equal(h.keys.verifications, before + 2, 'each wrong secret is verified again, never served from a cache');
    });

    it('caches a success: the same pair is verified once', async () => {
      const fresh = await h.createKey(ada, { name: 'cached' });
      const before = h.keys.verifications;
      for (let i = 0; i < 5; i++)
        assert.equal(
          (await h.call({ path: '/x', headers: { 'api-key': fresh.key, 'api-secret': fresh.secret } })).status,
          200,
        );
      assert.equal(h.keys.verifications, before + 1);
    });

    it('costs one bcrypt verification for 1,000 concurrent requests with one valid key', async () => {
      const burst = await h.createKey(ada, { name: 'burst' });
      const before = h.keys.verifications;
      const statuses = await Promise.all(
        Array.from({ length: 1000 }, () =>
          h.call({ path: '/x', headers: { 'api-key': burst.key, 'api-secret': burst.secret } }).then((r) => r.status),
        ),
      );
      assert.ok(statuses.every((s) => s === 200));
      assert.equal(h.keys.verifications, before + 1);
    });

    it('passes an unknown key anonymously with its headers on an optional route, 401 on a require route', async () => {
      const headers = {
        'api-key': '11111111-1111-4111-8111-111111111111',
        'api-secret': '22222222-2222-4222-8222-222222222222',
      };
      const res = await h.call({ path: '/v1/databases', host: 'docdb.localhost', headers });
      assert.equal(res.status, 200);
      const seen = h.seen(res);
      assert.equal(seen.headers['x-gateway-authentication'], undefined);
      assert.equal(seen.headers['api-key'], headers['api-key']);
      assert.equal(seen.headers['api-secret'], headers['api-secret']);
      const required = await h.call({ path: '/v0/apikeys', host: 'api.localhost', headers });
      assert.equal(required.status, 401);
    });

    it('takes a key found nowhere as unknown for a while, without another lookup, and answers alike', async () => {
      // Another service's key (a docdb database key) comes on every call to that service.
      const headers = {
        'api-key': '33333333-3333-4333-8333-333333333333',
        'api-secret': '44444444-4444-4444-8444-444444444444',
      };
      assert.equal(h.keys.knownUnknown(headers['api-key']), false);
      const first = await h.call({ path: '/v1/databases', host: 'docdb.localhost', headers });
      assert.equal(first.status, 200);
      assert.equal(h.keys.knownUnknown(headers['api-key']), true);
      for (const res of [first, await h.call({ path: '/v1/databases', host: 'docdb.localhost', headers })]) {
        assert.equal(res.status, 200);
        assert.equal(h.seen(res).headers['x-gateway-authentication'], undefined);
        assert.equal(h.seen(res).headers['api-key'], headers['api-key']);
      }
      assert.equal((await h.call({ path: '/v0/apikeys', host: 'api.localhost', headers })).status, 401);
      assert.equal(h.keys.knownUnknown(key.key), false, 'a key that exists is never taken as unknown');
    });

    it('treats only one of the two key headers as no credentials', async () => {
      const res = await h.call({ path: '/x', headers: { 'api-key': key.key } });
      assert.equal(res.status, 200);
      assert.equal(h.seen(res).headers['x-gateway-authentication'], undefined);
      assert.equal(h.seen(res).headers['api-key'], key.key);
      assert.equal(
        (await h.call({ path: '/v0/secret', host: 'gateway.localhost', headers: { 'api-secret': key.secret } })).status,
        401,
      );
    });

    it('applies scopes: projects and host rules, with the matched rule as host_metadata', async () => {
      const project = await h.createProject(ada, 'scoped-project');
      const projectKey = await h.createKey(ada, { name: 'project only', scopes: [{ projects: [project.id] }] });
      const hostKey = await h.createKey(ada, {
        name: 'host only',
        scopes: [{ host_rules: { 'CONFIG.localhost': '{"tier":"gold"}' } }],
      });
      const both = await h.createKey(ada, {
        name: 'both',
        scopes: [{ projects: [project.id], host_rules: { 'scoped-project.localhost': '{}' } }],
      });

      // Project scope: valid on the project host only.
      const onProject = await h.call({
        path: '/page',
        host: 'scoped-project.localhost',
        headers: { 'api-key': projectKey.key, 'api-secret': projectKey.secret },
      });
      assert.equal(onProject.status, 200);
      const projectIdentity = identityOf(h.seen(onProject).headers);
      assert.deepEqual(projectIdentity?.project, { id: project.id, slug: 'scoped-project' });
      assert.equal(h.seen(onProject).headers['x-project-id'], project.id);
      const offProject = await h.call({
        path: '/x',
        host: 'config.localhost',
        headers: { 'api-key': projectKey.key, 'api-secret': projectKey.secret },
      });
      assert.equal(offProject.status, 401, 'a project-scoped key fails outside project hosts');

      // Host rule: case-insensitive host match, metadata passed on.
      const onHost = await h.call({
        path: '/x',
        host: 'config.localhost:8080',
        headers: { 'api-key': hostKey.key, 'api-secret': hostKey.secret },
      });
      assert.equal(onHost.status, 200);
      assert.equal(identityOf(h.seen(onHost).headers)?.auth.host_metadata, '{"tier":"gold"}');
      assert.equal(
        (
          await h.call({
            path: '/x',
            host: 'docdb.localhost',
            headers: { 'api-key': hostKey.key, 'api-secret': hostKey.secret },
          })
        ).status,
        401,
      );

      // Registry pushes are checked against run.<domain> on every host that reaches the registry.
      const runKey = await h.createKey(ada, { name: 'registry', scopes: [{ host_rules: { 'run.localhost': '{}' } }] });
      const basic = (key: { key: string; secret: string }) => ({
        authorization: `Basic ${Buffer.from(`${key.key}:${key.secret}`).toString('base64')}`,
      });
      for (const host of ['run.localhost', 'localhost:8080', '127.0.0.1', 'api.localhost']) {
        const pushed = await h.call({ path: '/v2/', host, headers: basic(runKey) });
        assert.equal(pushed.status, 200, host);
        assert.equal(identityOf(h.seen(pushed).headers)?.user.id, ada.id, host);
      }
      // A key scoped elsewhere leaves the push anonymous (Basic that fails is dropped); the registry then challenges it.
      const elsewhere = await h.call({ path: '/v2/', host: 'localhost', headers: basic(hostKey) });
      assert.equal(
        identityOf(h.seen(elsewhere).headers),
        undefined,
        'a key scoped to another host carries no identity to the registry',
      );

      // Both in one scope: both must match.
      assert.equal(
        (
          await h.call({
            path: '/',
            host: 'scoped-project.localhost',
            headers: { 'api-key': both.key, 'api-secret': both.secret },
          })
        ).status,
        200,
      );
      assert.equal(
        (
          await h.call({
            path: '/x',
            host: 'config.localhost',
            headers: { 'api-key': both.key, 'api-secret': both.secret },
          })
        ).status,
        401,
      );
    });

    it('accepts the Basic form and removes it; failing Basic credentials pass anonymously on optional routes only', async () => {
      const ok = await h.call({ path: '/x', headers: { authorization: basic(key.key, key.secret) } });
      assert.equal(identityOf(h.seen(ok).headers)?.auth.method, 'api_key');
      assert.equal(h.seen(ok).headers.authorization, undefined);
      const wrong = basic(key.key, 'not-the-secret');
      const anonymous = await h.call({ path: '/v2/', host: 'config.localhost', headers: { authorization: wrong } });
      assert.equal(
        anonymous.status,
        200,
        'failed Basic credentials pass on, so the registry can send its own challenge',
      );
      assert.equal(h.seen(anonymous).headers['x-gateway-authentication'], undefined);
      assert.equal(
        (await h.call({ path: '/v0/secret', host: 'gateway.localhost', headers: { authorization: wrong } })).status,
        401,
      );
      // Basic credentials of someone else's system (not a platform key) pass untouched.
      const foreign = basic('registry-user', 'their-password');
      assert.equal(
        h.seen(await h.call({ path: '/v2/', host: 'config.localhost', headers: { authorization: foreign } })).headers
          .authorization,
        foreign,
      );
    });

    it('never hands a platform key to a backend: Basic with a wrong secret or outside its scopes is removed (issue 17, item 10)', async () => {
      const wrong = basic(key.key, 'not-the-secret');
      const wrongSeen = h.seen(
        await h.call({ path: '/run/x', host: 'api.localhost', headers: { authorization: wrong } }),
      );
      assert.equal(wrongSeen.headers.authorization, undefined, 'a wrong secret for a platform key is not passed on');
      assert.ok(
        !wrongSeen.rawHeaders.some((value) =>
          value.includes(Buffer.from(`${key.key}:`).toString('base64').slice(0, 12)),
        ),
      );
      const scoped = await h.createKey(ada, {
        name: 'config only',
        scopes: [{ host_rules: { 'config.localhost': '{}' } }],
      });
      const valid = basic(scoped.key, scoped.secret);
      const outside = await h.call({
        path: '/run/someone-elses-lambda',
        host: 'api.localhost',
        headers: { authorization: valid },
      });
      assert.equal(outside.status, 200, 'still anonymous, as failed Basic credentials are');
      assert.equal(
        h.seen(outside).headers.authorization,
        undefined,
        'the valid key and its secret never reach another backend',
      );
      assert.equal(h.seen(outside).headers['x-gateway-authentication'], undefined);
    });

    it('removes a platform session bearer token sent beside an API key, and passes other bearer values', async () => {
      const token = await h.session(ada);
      for (let round = 0; round < 2; round++) {
        // The second round takes the cached (synchronous) key path.
        const both = await h.call({
          path: '/run/x',
          host: 'api.localhost',
          headers: { 'api-key': key.key, 'api-secret': key.secret, authorization: `Bearer ${token}` },
        });
        assert.equal(both.status, 200);
        assert.equal(
          h.seen(both).headers.authorization,
          undefined,
          `round ${round}: the session token never reaches a backend`,
        );
        assert.equal(identityOf(h.seen(both).headers)?.auth.method, 'api_key');
      }
      const other = await h.call({
        path: '/schedulers',
        host: 'config.localhost',
        headers: { 'api-key': key.key, 'api-secret': key.secret, authorization: 'Bearer sk-scheduler-key' },
      });
      assert.equal(h.seen(other).headers.authorization, 'Bearer sk-scheduler-key', "a service's own bearer key passes");
    });

    it('answers an unknown key and a wrong secret with the same 401 on a require route', async () => {
      const unknown = await h.call({
        path: '/v0/secret',
        host: 'gateway.localhost',
        headers: { 'api-key': '11111111-1111-4111-8111-111111111111', 'api-secret': 'x' },
      });
      const wrong = await h.call({
        path: '/v0/secret',
        host: 'gateway.localhost',
        headers: { 'api-key': key.key, 'api-secret': 'x' },
      });
      assert.equal(unknown.status, 401);
      assert.equal(wrong.status, 401);
      assert.deepEqual(unknown.json(), wrong.json());
    });

    it('stops a revoked key at once', async () => {
      const doomed = await h.createKey(ada, { name: 'doomed' });
      const headers = { 'api-key': doomed.key, 'api-secret': doomed.secret };
      assert.equal((await h.call({ path: '/v0/secret', host: 'gateway.localhost', headers })).status, 200);
      const revoke = await h.call({
        method: 'DELETE',
        path: `/v0/apikeys/${doomed.key}`,
        host: 'api.localhost',
        headers,
      });
      assert.equal(revoke.status, 200);
      // The revocation travels through the notifier (on PostgreSQL a NOTIFY round trip): within a second.
      const started = Date.now();
      while ((await h.call({ path: '/v0/secret', host: 'gateway.localhost', headers })).status !== 401) {
        assert.ok(Date.now() - started < 1000, 'the revoked key still worked after a second');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const optional = await h.call({ path: '/x', headers });
      assert.equal(h.seen(optional).headers['x-gateway-authentication'], undefined, 'a revoked key is an unknown key');
    });
  });

  describe('sessions', () => {
    it('authenticates the cookie, passes the session id and strips the token from Cookie', async () => {
      const token = await h.session(ada);
      const res = await h.call({ path: '/x', headers: { cookie: `theme=dark; stratus_session=${token}; lang=en` } });
      const seen = h.seen(res);
      const identity = identityOf(seen.headers);
      assert.equal(identity?.auth.method, 'session');
      assert.equal(identity?.user.id, ada.id);
      assert.match(identity?.session?.id ?? '', UUID);
      assert.equal(seen.headers.cookie, 'theme=dark; lang=en');
      assert.ok(!JSON.stringify(seen).includes(token), 'no backend sees the session token');
    });

    it('authenticates a bearer session token and removes it', async () => {
      const token = await h.session(ada);
      const res = await h.call({ path: '/x', headers: { authorization: `Bearer ${token}` } });
      const seen = h.seen(res);
      assert.equal(identityOf(seen.headers)?.auth.method, 'bearer');
      assert.equal(seen.headers.authorization, undefined);
    });

    it('passes unknown cookies and bearer values anonymously on optional routes, 401 on require routes', async () => {
      const cookie = await h.call({ path: '/x', headers: { cookie: 'stratus_session=nope' } });
      assert.equal(cookie.status, 200);
      assert.equal(h.seen(cookie).headers['x-gateway-authentication'], undefined);
      const bearer = await h.call({
        path: '/schedulers',
        host: 'config.localhost',
        headers: { authorization: 'Bearer scheduler-key-123' },
      });
      assert.equal(
        h.seen(bearer).headers.authorization,
        'Bearer scheduler-key-123',
        'the scheduler reads its own keys from it',
      );
      assert.equal(h.seen(bearer).headers['x-gateway-authentication'], undefined);
      for (const headers of [{ cookie: 'stratus_session=nope' }, { authorization: 'Bearer nope' }, {}] as Record<
        string,
        string
      >[]) {
        assert.equal((await h.call({ path: '/v0/secret', host: 'gateway.localhost', headers })).status, 401);
      }
    });

    it('slides the expiry of a session not used for an hour and re-issues the cookie', async () => {
      const token = await h.session(ada);
      const found = await findSessionByToken(h.store.sql, token);
      await extendSession(h.store.sql, found!.session.id, Date.now() - 2 * 3600_000);
      const res = await h.call({ path: '/x', headers: { cookie: `stratus_session=${token}` } });
      assert.match(String(res.headers['set-cookie']), /stratus_session=.*Max-Age=604800/);
      const after = await findSessionByToken(h.store.sql, token);
      assert.ok(after!.session.expiresAt > Date.now() + 7 * 24 * 3600_000 - 60_000);
      const quiet = await h.call({ path: '/x', headers: { cookie: `stratus_session=${token}` } });
      assert.equal(quiet.headers['set-cookie'], undefined, 'a fresh session is not rewritten on every request');
    });

    it('ends a session on logout, everywhere at once', async () => {
      const token = await h.session(ada);
      const logout = await h.call({
        method: 'POST',
        path: '/v0/logout',
        host: 'auth.localhost',
        headers: { cookie: `stratus_session=${token}` },
      });
      assert.equal(logout.status, 204);
      assert.match(String(logout.headers['set-cookie']), /stratus_session=;.*Max-Age=0/);
      assert.equal(
        (
          await h.call({
            path: '/v0/secret',
            host: 'gateway.localhost',
            headers: { cookie: `stratus_session=${token}` },
          })
        ).status,
        401,
      );
    });

    /** Signs a new user in through the public port at `path` on `host`. */
    const logIn = async (email: string, path: string, host: string) => {
      await h.user(email);
      const login = await h.call({
        method: 'POST',
        path,
        host,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password: 'correct horse battery' }),
      });
      assert.equal(login.status, 200);
      return login;
    };

    it('logs in through the gateway and uses the cookie it sets', async () => {
      const login = await logIn('grace@example.com', '/v0/login', 'auth.localhost');
      const cookie = String(login.headers['set-cookie']).split(';')[0]!;
      const me = await h.call({ path: '/v0/me', host: 'auth.localhost', headers: { cookie } });
      assert.equal(me.status, 200);
      assert.equal(me.json<{ email: string }>().email, 'grace@example.com');
    });

    it('logs in through the front door without a cookie there: the token is a bearer', async () => {
      const login = await logIn('front@example.com', '/services/auth/v0/login', 'localhost:8080');
      assert.equal(login.headers['set-cookie'], undefined, 'the front door serves user code: no session cookie on it');
      const { token } = login.json<{ token: string }>();
      const me = await h.call({
        path: '/services/auth/v0/me',
        host: 'localhost:8080',
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(me.json<{ email: string }>().email, 'front@example.com');
    });
  });

  describe('route policies (decisions §8)', () => {
    it('requires credentials on every key-value node path but its health checks', async () => {
      assert.equal((await h.call({ path: '/v1/collections', host: 'kv.localhost' })).status, 401);
      for (const path of ['/healthz', '/livez', '/readyz', '/startupz', '/openapi.json'])
        assert.equal((await h.call({ path, host: 'kv.localhost' })).status, 200, path);
      const withKey = await h.call({
        path: '/v1/collections',
        host: 'kv.localhost',
        headers: { 'api-key': key.key, 'api-secret': key.secret },
      });
      assert.equal(withKey.status, 200);
    });

    it('requires credentials for key and project management on api and apikeys hosts only', async () => {
      assert.equal((await h.call({ path: '/v0/projects', host: 'api.localhost' })).status, 401);
      assert.equal((await h.call({ path: '/v0/apikeys', host: 'apikeys.localhost' })).status, 401);
      assert.equal(
        (await h.call({ path: '/v0/apikeys', host: 'config.localhost' })).status,
        200,
        'other hosts leave it to their service',
      );
    });

    it("applies a service host's policies, defaults and configured rules, under /services/<name> on the front door", async () => {
      assert.equal((await h.call({ path: '/services/kv/v1/collections', host: 'localhost' })).status, 401);
      assert.equal((await h.call({ path: '/services/kv/healthz', host: 'localhost' })).status, 200);
      assert.equal((await h.call({ path: '/services/apikeys/v0/apikeys', host: 'localhost' })).status, 401);
      const listed = await h.call({
        path: '/services/apikeys/v0/apikeys',
        host: 'localhost',
        headers: { 'api-key': key.key, 'api-secret': key.secret },
      });
      assert.equal(listed.status, 200);
      assert.ok(Array.isArray(listed.json<{ api_keys: unknown[] }>().api_keys));
      const custom = await startHarness({ routePolicies: [{ host: 'config', prefix: '/private', auth: 'require' }] });
      try {
        assert.equal((await custom.call({ path: '/services/config/private/x', host: 'localhost' })).status, 401);
        assert.equal(
          (await custom.call({ path: '/private/x', host: 'localhost' })).status,
          404,
          'no front-door prefix',
        );
      } finally {
        await custom.close();
      }
    });

    it('applies configured rules before the defaults', async () => {
      const custom = await startHarness({
        routePolicies: [
          { host: 'config', prefix: '/private', auth: 'require' },
          { host: '*', prefix: '/v0/secret', auth: 'optional' },
        ],
      });
      try {
        assert.equal((await custom.call({ path: '/private/x' })).status, 401);
        assert.equal((await custom.call({ path: '/privateer' })).status, 200, 'prefixes match whole segments');
        const secret = await custom.call({ path: '/v0/secret', host: 'gateway.localhost' });
        assert.equal(secret.status, 401);
        assert.match(
          secret.json<{ error: { message: string } }>().error.message,
          /X-Gateway-Authentication/,
          'passed by the gateway, refused by the endpoint itself',
        );
      } finally {
        await custom.close();
      }
    });
  });

  describe('browser protections', () => {
    it('does not let a foreign page or a project host use the session cookie for state changes', async () => {
      const token = await h.session(ada);
      const create = (origin?: Record<string, string>) =>
        h.call({
          method: 'POST',
          path: '/v0/apikeys',
          host: 'api.localhost',
          headers: { cookie: `stratus_session=${token}`, 'content-type': 'application/json', ...origin },
          body: '{"name":"csrf"}',
        });
      assert.equal((await create({ origin: 'https://evil.example' })).status, 401);
      assert.equal(
        (await create({ origin: 'http://someones-project.localhost:8080' })).status,
        401,
        'project hosts serve user code',
      );
      for (const origin of ['http://lambda.localhost:8080', 'http://api.localhost:8080', 'http://localhost:8080']) {
        assert.equal((await create({ origin })).status, 401, `${origin} serves lambda output (user code)`);
      }
      assert.equal((await create({ origin: 'null' })).status, 401);
      assert.equal((await create({ referer: 'http://evil.example/page' })).status, 401);
      assert.equal((await create({ origin: 'http://console.localhost:8080' })).status, 201);
      assert.equal((await create()).status, 201, 'non-browser clients send no Origin');
      const read = await h.call({
        path: '/v0/secret',
        host: 'gateway.localhost',
        headers: { cookie: `stratus_session=${token}`, origin: 'https://evil.example' },
      });
      assert.equal(read.status, 200, 'safe methods are not state changes');
    });

    it('answers CORS preflights from platform origins and marks their responses', async () => {
      const preflight = await h.call({
        method: 'OPTIONS',
        path: '/v0/apikeys',
        host: 'api.localhost',
        headers: {
          origin: 'http://console.localhost:8080',
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type',
        },
      });
      assert.equal(preflight.status, 204);
      assert.equal(preflight.headers['access-control-allow-origin'], 'http://console.localhost:8080');
      assert.equal(preflight.headers['access-control-allow-credentials'], 'true');
      assert.match(String(preflight.headers['access-control-allow-methods']), /POST/);
      assert.equal(preflight.headers['access-control-allow-headers'], 'content-type');
      const actual = await h.call({ path: '/x', headers: { origin: 'http://console.localhost:8080' } });
      assert.equal(actual.headers['access-control-allow-origin'], 'http://console.localhost:8080');
      assert.equal(actual.headers.vary, 'Origin');
      const foreign = await h.call({
        method: 'OPTIONS',
        path: '/x',
        headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
      });
      assert.equal(foreign.headers['access-control-allow-origin'], undefined);
      const fromProject = await h.call({ path: '/x', headers: { origin: 'http://my-project.localhost' } });
      assert.equal(fromProject.headers['access-control-allow-origin'], undefined);
      for (const origin of ['http://lambda.localhost:8080', 'http://api.localhost:8080', 'http://localhost:8080']) {
        const userCode = await h.call({
          method: 'OPTIONS',
          path: '/v0/apikeys',
          host: 'api.localhost',
          headers: { origin, 'access-control-request-method': 'POST' },
        });
        assert.equal(
          userCode.headers['access-control-allow-origin'],
          undefined,
          `${origin} serves user code: no credentialed CORS`,
        );
        assert.equal(userCode.headers['access-control-allow-credentials'], undefined);
      }
    });

    it("grants a project host's own origin and the origins a project lists plain CORS, at once after a change", async () => {
      const project = await h.createProject(ada, 'cors-site');
      const ask = (origin: string, method = 'OPTIONS') =>
        h.call({
          method,
          path: '/services/config/v0/configs',
          host: 'localhost:8080',
          headers: { origin, 'access-control-request-method': 'PUT', 'access-control-request-headers': 'api-key' },
        });
      const own = await ask('http://cors-site.localhost:8080');
      assert.equal(own.status, 204, 'answered by the gateway');
      assert.equal(own.headers['access-control-allow-origin'], 'http://cors-site.localhost:8080');
      assert.equal(own.headers['access-control-allow-credentials'], undefined, 'never with credentials');
      assert.equal(own.headers['access-control-allow-headers'], 'api-key');
      assert.match(String(own.headers.vary), /Origin/);

      const external = 'https://app.example.com';
      const before = await ask(external);
      assert.equal(before.headers['access-control-allow-origin'], undefined);
      assert.equal(h.seen(before).method, 'OPTIONS', 'an origin without a grant: the preflight goes on to the service');
      const patched = await h.apikeys.inject({
        method: 'PATCH',
        url: `/v0/projects/${project.id}`,
        headers: { ...asUser(ada.id), 'content-type': 'application/json' },
        payload: JSON.stringify({ allowed_origins: [external] }),
      });
      assert.equal(patched.statusCode, 200, patched.body);
      const listed = await ask(external);
      assert.equal(listed.status, 204);
      assert.equal(listed.headers['access-control-allow-origin'], external);
      assert.equal(listed.headers['access-control-allow-credentials'], undefined);
      const actual = await ask(external, 'GET');
      assert.equal(actual.headers['access-control-allow-origin'], external);
      assert.match(String(actual.headers['access-control-expose-headers']), /ETag/);
      assert.match(String(actual.headers['access-control-expose-headers']), /X-Request-Id/);
      assert.equal(actual.headers.vary, 'Origin');

      // A listed origin is not trusted with the cookie: a state change from it is anonymous.
      const token = await h.session(ada);
      const create = await h.call({
        method: 'POST',
        path: '/v0/apikeys',
        host: 'api.localhost',
        headers: { cookie: `stratus_session=${token}`, origin: external, 'content-type': 'application/json' },
        body: '{"name":"csrf"}',
      });
      assert.equal(create.status, 401);

      await h.apikeys.inject({ method: 'DELETE', url: `/v0/projects/${project.id}`, headers: asUser(ada.id) });
      assert.equal((await ask(external)).headers['access-control-allow-origin'], undefined, 'gone with the project');
      assert.equal((await ask('http://cors-site.localhost:8080')).headers['access-control-allow-origin'], undefined);
    });

    it('grants CORS_ORIGINS credentialed CORS and the session cookie', async () => {
      const custom = await startHarness({ corsOrigins: ['http://localhost:5173'] });
      try {
        const user = await custom.user('cors-cookie@example.com');
        const token = await custom.session(user);
        const preflight = await custom.call({
          method: 'OPTIONS',
          path: '/v0/apikeys',
          host: 'api.localhost',
          headers: { origin: 'http://localhost:5173', 'access-control-request-method': 'POST' },
        });
        assert.equal(preflight.status, 204);
        assert.equal(preflight.headers['access-control-allow-origin'], 'http://localhost:5173');
        assert.equal(preflight.headers['access-control-allow-credentials'], 'true');
        const create = await custom.call({
          method: 'POST',
          path: '/v0/apikeys',
          host: 'api.localhost',
          headers: {
            cookie: `stratus_session=${token}`,
            origin: 'http://localhost:5173',
            'content-type': 'application/json',
          },
          body: '{"name":"from the app"}',
        });
        assert.equal(create.status, 201, create.text);
        assert.equal(create.headers['access-control-allow-credentials'], 'true');
      } finally {
        await custom.close();
      }
    });

    it('refuses to start with a CORS_ORIGINS entry that serves user code', () => {
      const check = (origin: string) => credentialedOrigins({ domain: 'localhost', port: 8080, corsOrigins: [origin] });
      for (const origin of [
        'http://localhost:8080',
        'http://api.localhost',
        'https://lambda.localhost',
        'http://my-app.localhost:8080',
      ])
        assert.throws(() => check(origin), /user code/, origin);
      // Platform origins, another port of the bare domain (a development server) and other sites are fine.
      for (const origin of ['http://console.localhost:8080', 'http://localhost:5173', 'https://app.example.com'])
        assert.deepEqual(check(origin), [origin]);
    });
  });

  describe('headers the gateway manages', () => {
    it('replaces X-Request-Id with a fresh UUID, echoes it, and sets X-Forwarded-*', async () => {
      const res = await h.call({
        path: '/x',
        host: 'config.localhost:8080',
        headers: { 'x-request-id': 'client-chosen', 'x-forwarded-for': '203.0.113.9' },
      });
      const seen = h.seen(res);
      assert.match(seen.headers['x-request-id']!, UUID);
      assert.equal(res.headers['x-request-id'], seen.headers['x-request-id']);
      assert.equal(seen.headers['x-forwarded-for'], '127.0.0.1');
      assert.equal(seen.headers['x-forwarded-proto'], 'http');
      assert.equal(seen.headers['x-forwarded-host'], 'config.localhost:8080');
    });

    it('strips hop-by-hop headers and those named in Connection', async () => {
      const res = await h.call({
        path: '/x',
        headers: {
          connection: 'keep-alive, x-private',
          'x-private': 'secret',
          te: 'trailers',
          'keep-alive': 'timeout=5',
          'proxy-authorization': 'Basic abc',
          'x-kept': 'yes',
        },
      });
      const seen = h.seen(res);
      for (const name of ['connection', 'x-private', 'te', 'keep-alive', 'proxy-authorization'])
        assert.equal(seen.headers[name], undefined, name);
      assert.equal(seen.headers['x-kept'], 'yes');
    });

    it('injects its headers after removing those the client named in Connection, and refuses naming its own', async () => {
      const project = await h.createProject(ada, 'conn-project');
      const token = await h.session(ada);
      const named = await h.call({
        path: '/api/v0/lambdas',
        host: 'conn-project.localhost',
        headers: {
          authorization: `Bearer ${token}`,
          connection: 'keep-alive, x-forwarded-for, api-key',
          'api-key': 'k',
        },
      });
      assert.equal(named.status, 200);
      const seen = h.seen(named);
      assert.equal(seen.headers['x-project-id'], project.id, 'the injected project header is there');
      assert.equal(seen.headers['x-forwarded-for'], '127.0.0.1', 'the injected X-Forwarded-For is there');
      assert.equal(seen.headers['api-key'], undefined, 'a header named in Connection is hop-by-hop');
      assert.equal(identityOf(seen.headers)?.user.id, ada.id);
      for (const header of ['x-project-id', 'X-Gateway-Authentication', 'keep-alive, X-Project-Id']) {
        const refused = await h.call({
          path: '/api/v0/lambdas',
          host: 'conn-project.localhost',
          headers: { authorization: `Bearer ${token}`, connection: header },
        });
        assert.equal(refused.status, 400, header);
        assert.equal(refused.json<{ error: { code: string } }>().error.code, 'bad_request');
      }
    });

    it('on the internal port trusts the caller but keeps require routes closed without identity', async () => {
      const trusted = await h.callInternal({
        path: '/v0/secret',
        host: 'gateway.localhost',
        headers: { 'x-gateway-authentication': JSON.stringify({ user: { id: 'svc' } }) },
      });
      assert.equal(trusted.status, 200);
      assert.equal((await h.callInternal({ path: '/v0/secret', host: 'gateway.localhost' })).status, 401);
      const passed = await h.callInternal({
        path: '/x',
        headers: { 'x-gateway-authentication': '{"user":{"id":"svc"}}', 'api-key': key.key, 'api-secret': 'wrong' },
      });
      assert.equal(passed.status, 200, 'no authentication step on the internal port');
      assert.equal(h.seen(passed).headers['x-gateway-authentication'], '{"user":{"id":"svc"}}');
    });

    it('writes one access-log line per request without secrets or query strings', async () => {
      const before = h.accessLog.length;
      await h.call({
        path: '/logged?token=supersecret',
        headers: { 'api-key': key.key, 'api-secret': key.secret, 'user-agent': 'test-agent' },
      });
      await new Promise((resolve) => setTimeout(resolve, 20));
      const lines = h.accessLog.slice(before);
      assert.equal(lines.length, 1);
      const line = lines[0]!;
      assert.equal(line.method, 'GET');
      assert.equal(line.host, 'config.localhost');
      assert.equal(line.path, '/logged');
      assert.equal(line.status, 200);
      assert.equal(line.auth, 'api_key');
      assert.equal(line.user, ada.id);
      assert.equal(line.upstream, 'inproc:config');
      assert.equal(line.user_agent, 'test-agent');
      assert.equal(typeof line.duration_ms, 'number');
      assert.ok(!JSON.stringify(line).includes(key.secret));
      assert.ok(!JSON.stringify(line).includes('supersecret'));
    });

    it('logs and counts a /services/<name> request by the path and host the client sent', async () => {
      const before = h.accessLog.length;
      const counted = () => h.stats.rows().find((row) => row.host === 'localhost')?.served_requests ?? 0;
      const countedBefore = counted();
      await h.call({ path: '/services/config/logged?token=supersecret', host: 'localhost:8080' });
      await new Promise((resolve) => setTimeout(resolve, 20));
      const lines = h.accessLog.slice(before);
      assert.equal(lines.length, 1);
      assert.equal(lines[0]!.path, '/services/config/logged');
      assert.equal(lines[0]!.host, 'localhost');
      assert.equal(lines[0]!.upstream, 'inproc:config');
      assert.equal(counted(), countedBefore + 1);
    });
  });
});

describe('gateway: bounded bcrypt work for failed credential checks (issue 17, item 13)', () => {
  let h: Harness;
  let ada: User;
  let key: { key: string; secret: string };
  const LIMITS = { maxFailuresPerKey: 5, maxFailuresPerAddress: 12, windowMs: 60_000, maxConcurrentPerAddress: 2 };

  before(async () => {
    h = await startHarness({}, { guard: new CredentialGuard(LIMITS) });
    ada = await h.user('guard@example.com');
    key = await h.createKey(ada, { name: 'guarded' });
  });
  after(async () => {
    await h.close();
  });

  it('stops verifying a key after its failures in a window: 429 with Retry-After, while a cached key keeps working', async () => {
    const other = await h.createKey(ada, { name: 'in use' });
    assert.equal(
      (await h.call({ path: '/x', headers: { 'api-key': other.key, 'api-secret': other.secret } })).status,
      200,
    );
    const before = h.keys.verifications;
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++)
      statuses.push((await h.call({ path: '/x', headers: { 'api-key': key.key, 'api-secret': `wrong-${i}` } })).status);
    assert.deepEqual(statuses, [401, 401, 401, 401, 401, 429, 429, 429, 429, 429]);
    assert.equal(h.keys.verifications, before + LIMITS.maxFailuresPerKey, 'no bcrypt once the key is limited');
    const limited = await h.call({ path: '/x', headers: { 'api-key': key.key, 'api-secret': key.secret } });
    assert.equal(limited.status, 429, 'even the right secret waits for the window while the key is under attack');
    assert.ok(Number(limited.headers['retry-after']) >= 1);
    assert.equal(limited.json<{ error: { code: string } }>().error.code, 'too_many_requests');
    assert.equal(
      (await h.call({ path: '/x', headers: { 'api-key': other.key, 'api-secret': other.secret } })).status,
      200,
      'a cached key is not checked again',
    );
  });

  it('caps concurrent checks per address and failures per address across keys', async () => {
    const keys = await Promise.all([1, 2, 3].map((n) => h.createKey(ada, { name: `k${n}` })));
    const before = h.keys.verifications;
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        h
          .call({ path: '/x', headers: { 'api-key': keys[i % 3]!.key, 'api-secret': `wrong-${i}` } })
          .then((r) => r.status),
      ),
    );
    assert.ok(answers.includes(429), `some concurrent checks are refused: ${answers.join()}`);
    assert.ok(
      answers.every((status) => status === 401 || status === 429),
      answers.join(),
    );
    assert.ok(h.keys.verifications - before <= answers.filter((s) => s === 401).length, 'refused checks run no bcrypt');
    // Past the address's failure budget every uncached check from it is refused, whatever the key.
    for (let i = 0; i < LIMITS.maxFailuresPerAddress; i++)
      await h.call({ path: '/x', headers: { 'api-key': keys[i % 3]!.key, 'api-secret': `again-${i}` } });
    const fresh = await h.createKey(ada, { name: 'fresh' });
    assert.equal(
      (await h.call({ path: '/x', headers: { 'api-key': fresh.key, 'api-secret': fresh.secret } })).status,
      429,
    );
  });
});

describe('gateway: failed-key limits per client behind a trusted load balancer', () => {
  let h: Harness;
  let ada: User;
  const LIMITS = { maxFailuresPerKey: 100, maxFailuresPerAddress: 3, windowMs: 60_000, maxConcurrentPerAddress: 2 };

  before(async () => {
    // The test client connects from 127.0.0.1: it plays the balancer, naming clients in X-Forwarded-For.
    h = await startHarness({ trustedProxies: ['127.0.0.1'] }, { guard: new CredentialGuard(LIMITS) });
    ada = await h.user('balanced@example.com');
  });
  after(async () => {
    await h.close();
  });

  it('limits the client that fails, not every client of the balancer', async () => {
    const [spent, fresh] = await Promise.all([
      h.createKey(ada, { name: 'spent' }),
      h.createKey(ada, { name: 'fresh' }),
    ]);
    const from = (client: string, credentials: { key: string; secret: string }) =>
      h.call({
        path: '/x',
        headers: { 'x-forwarded-for': client, 'api-key': credentials.key, 'api-secret': credentials.secret },
      });
    for (let i = 0; i < LIMITS.maxFailuresPerAddress; i++)
      assert.equal((await from('203.0.113.1', { key: spent.key, secret: `wrong-${i}` })).status, 401);
    assert.equal((await from('203.0.113.1', fresh)).status, 429, 'the failing client is limited');
    assert.equal((await from('203.0.113.2', fresh)).status, 200, 'another client of the same balancer is not');
  });
});

describe('CredentialGuard', () => {
  it('counts failures in a fixed window per key and per address, and releases concurrency slots once', async () => {
    let now = 1_000;
    const guard = new CredentialGuard(
      { maxFailuresPerKey: 2, maxFailuresPerAddress: 3, windowMs: 10_000, maxConcurrentPerAddress: 1 },
      () => now,
    );
    const first = await guard.admit('a', 'k');
    assert.ok(first.ok);
    assert.deepEqual(
      await guard.admit('a', 'k'),
      { ok: false, retryAfterSeconds: 1 },
      'one check at a time per address',
    );
    assert.ok((await guard.admit('b', 'k')).ok, 'another address has its own slot');
    if (first.ok) {
      first.release();
      first.release();
    }
    await guard.fail('a', 'k');
    await guard.fail('b', 'k');
    const limited = await guard.admit('c', 'k');
    assert.deepEqual(limited, { ok: false, retryAfterSeconds: 10 }, 'the key is limited for every address');
    now += 10_000;
    assert.ok((await guard.admit('c', 'k')).ok, 'the window ends');
  });

  it('keeps at most maxEntries counters', async () => {
    const guard = new CredentialGuard({
      maxFailuresPerKey: 1,
      maxFailuresPerAddress: 1_000,
      windowMs: 60_000,
      maxConcurrentPerAddress: 1,
      maxEntries: 10,
    });
    for (let i = 0; i < 100; i++) await guard.fail('a', `k${i}`);
    assert.equal((await guard.admit('z', 'k0')).ok, true, 'the oldest counters were dropped');
    assert.equal((await guard.admit('z', 'k99')).ok, false, 'the newest is kept');
  });

  it('shares failure counts through the database: failures counted by two instances add up (README: What instances share)', async () => {
    const database = await createTestDatabase();
    const connections = [await database.connect(), await database.connect()];
    try {
      await migrate(connections[0]!.database, [authService.migrations]);
      let now = 1_000_000;
      const limits = { maxFailuresPerKey: 4, maxFailuresPerAddress: 100, windowMs: 10_000, maxConcurrentPerAddress: 4 };
      const [a, b] = connections.map(
        (connection) => new CredentialGuard(limits, () => now, new SharedFailureCounts(connection)),
      ) as [CredentialGuard, CredentialGuard];
      // Two failures through each instance, each from its own address: the key is spent on both.
      await a.fail('10.0.0.1', 'k');
      await a.fail('10.0.0.1', 'k');
      await b.fail('10.0.0.2', 'k');
      assert.equal(await a.limitedEverywhere('10.0.0.3', 'k'), undefined, 'three failures are under the limit');
      await b.fail('10.0.0.2', 'k');
      assert.equal(await a.limitedEverywhere('10.0.0.3', 'k'), 10);
      assert.deepEqual(a.admit('10.0.0.3', 'k'), { ok: false, retryAfterSeconds: 10 }, 'remembered here');
      assert.equal(await b.limitedEverywhere('10.0.0.4', 'k'), 10);
      assert.equal(await a.limitedEverywhere('10.0.0.3', 'other'), undefined, 'another key is not limited');
      now += 10_000;
      assert.equal(await b.limitedEverywhere('10.0.0.4', 'k'), undefined, 'the shared window ends');
      assert.ok(b.admit('10.0.0.4', 'k').ok);
      // The next failure starts a new window and deletes the expired counters.
      await a.fail('10.0.0.9', 'fresh');
      const rows = await connections[0]!.database.read(() =>
        all<{ name: string; failures: number }>('select name, failures from auth_credential_failures order by name'),
      );
      assert.deepEqual(
        rows.map((row) => [row.name, Number(row.failures)]),
        [
          ['a:10.0.0.9', 1],
          ['k:fresh', 1],
        ],
      );
    } finally {
      for (const connection of connections) await connection.close();
      await database.cleanup();
    }
  });
});
