import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { lambdaServiceWith } from '../../../src/services/lambda/index.ts';
import { run } from '../../../src/store/sql-work.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';
import { startTestPlatform, type TestPlatform } from '../../helpers/platform.ts';

// Issue 17, items A and F: lambda output on platform hosts is powerless (nosniff + a sandboxing
// CSP, no platform cookies), and a lambda learns only the id and email of a signed-in visitor.

const SANDBOX = 'sandbox allow-scripts allow-forms allow-popups';
const PLATFORM_HOSTS = [
  'lambda.localhost',
  'api.localhost:8080',
  'localhost:8080',
  'localhost',
  '127.0.0.1:8080',
  '[::1]:8080',
  'console.localhost',
  'auth.localhost',
];

describe('lambda output on platform and project hosts', () => {
  let service: TestService;
  const owner = asUser('user-owner');
  const ids: Record<string, string> = {};
  const projectIds: Record<string, string> = {};

  before(async () => {
    service = await startTestService(lambdaServiceWith({ timeoutMs: 2000, memoryLimitMiB: 64, prewarm: 1 }));
    await service.store.sql.database.write(function* () {
      yield* run('create table apikeys_project_owners (project_id text not null, user_id text not null)');
      yield* run(`insert into apikeys_project_owners (project_id, user_id) values ('proj-shop', 'user-owner')`);
    });
    const lambdas: Record<string, Record<string, unknown>> = {
      json: { code: 'export default () => ({ ok: true })' },
      text: { code: 'write("<script>alert(1)</script>")' },
      response: {
        code: 'export default () => new Response("<h1>hi</h1>", { headers: { "content-type": "text/html" } })',
      },
      html: { language: 'static-html', code: '<h1>static</h1>' },
      css: { language: 'static-css', code: 'body{}' },
      ownCsp: {
        code: 'export default () => new Response("x", { headers: { "Content-Security-Policy": "sandbox allow-scripts allow-same-origin", "X-Content-Type-Options": "sniff-please" } })',
      },
      cookies: {
        code: `export default () => {
          const h = new Headers();
          h.append("Set-Cookie", "stratus_session=fixated; Path=/; HttpOnly");
          h.append("Set-Cookie", "__Host-stratus_session=fixated; Path=/; Secure");
          h.append("Set-Cookie", "__Secure-stratus_sso=x; Path=/; Secure");
          h.append("Set-Cookie", " STRATUS_SESSION=upper; Path=/");
          h.append("Set-Cookie", "theme=dark; Path=/");
          h.append("Set-Cookie", "my_stratus_pref=1");
          return new Response("c", { headers: h });
        }`,
      },
      seen: {
        code: 'export default (req) => ({ identity: req.headers["x-gateway-authentication"] ?? null, cookie: req.headers.cookie ?? null })',
      },
    };
    for (const [name, body] of Object.entries(lambdas)) {
      const res = await service.app.inject({
        method: 'POST',
        url: '/api/v0/lambdas',
        headers: { ...owner, 'content-type': 'application/json' },
        payload: JSON.stringify({ name, method: 'GET', path: `/${name}`, ...body }),
      });
      assert.equal(res.statusCode, 201, res.body);
      ids[name] = res.json<{ id: string }>().id;
    }
    // The same lambdas in a project, for its host's mux.
    for (const name of ['json', 'html', 'ownCsp', 'cookies', 'seen']) {
      const res = await service.app.inject({
        method: 'POST',
        url: '/api/v0/lambdas',
        headers: { ...owner, 'x-project-id': 'proj-shop', host: 'shop.localhost', 'content-type': 'application/json' },
        payload: JSON.stringify({ ...lambdas[name], name: `p-${name}`, method: 'GET', path: `/p/${name}` }),
      });
      assert.equal(res.statusCode, 201, res.body);
      projectIds[name] = res.json<{ id: string }>().id;
    }
  });
  after(async () => {
    await service.close();
  });

  const get = (url: string, host: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> =>
    service.app.inject({ method: 'GET', url, headers: { host, ...headers } });
  const cookieNames = (res: LightMyRequestResponse): string[] => {
    const raw = res.headers['set-cookie'];
    const list = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
    return list.map((c) => c.split(';')[0]!.split('=')[0]!.trim());
  };

  it('sandboxes every kind of lambda output served from a platform host, through /run and /mux', async () => {
    for (const host of PLATFORM_HOSTS) {
      for (const name of ['json', 'text', 'response', 'html', 'css']) {
        for (const url of [`/run/${ids[name]}`, `/mux/user-owner/${name}`]) {
          const res = await get(url, host);
          assert.equal(res.statusCode, 200, `${host} ${url}: ${res.body}`);
          assert.equal(res.headers['x-content-type-options'], 'nosniff', `${host} ${url}`);
          assert.equal(res.headers['content-security-policy'], SANDBOX, `${host} ${url}`);
        }
      }
    }
  });

  it("replaces a lambda's own CSP and X-Content-Type-Options on platform hosts, keeps its CSP on its project host", async () => {
    const onPlatform = await get(`/run/${ids.ownCsp}`, 'lambda.localhost');
    assert.equal(onPlatform.headers['content-security-policy'], SANDBOX);
    assert.equal(onPlatform.headers['x-content-type-options'], 'nosniff');
    const onProject = await get('/p/ownCsp', 'shop.localhost', { 'x-project-id': 'proj-shop' });
    assert.equal(onProject.statusCode, 200, onProject.body);
    assert.equal(onProject.headers['content-security-policy'], 'sandbox allow-scripts allow-same-origin');
    assert.equal(onProject.headers['x-content-type-options'], 'nosniff');
  });

  it('serves a project host as its own origin: nosniff but no sandbox, on the mux and on /run', async () => {
    for (const url of ['/p/json', '/p/html', `/run/${projectIds.json}`, `/run/${projectIds.html}`]) {
      const res = await get(url, 'shop.localhost:8080', { 'x-project-id': 'proj-shop' });
      assert.equal(res.statusCode, 200, `${url}: ${res.body}`);
      assert.equal(res.headers['x-content-type-options'], 'nosniff', url);
      assert.equal(res.headers['content-security-policy'], undefined, url);
    }
  });

  it('treats a host that is not a project host of the configured domain as a platform host', async () => {
    // A project label under another domain, or a platform label with the project header, is not a project host.
    for (const host of ['shop.example.com', 'lambda.localhost', 'a.b.localhost']) {
      const res = await get('/p/json', host, { 'x-project-id': 'proj-shop' });
      assert.equal(res.statusCode, 200, `${host}: ${res.body}`);
      assert.equal(res.headers['content-security-policy'], SANDBOX, host);
    }
  });

  it('drops Set-Cookie for platform cookie names from lambda responses on every host', async () => {
    const expected = ['theme', 'my_stratus_pref'];
    assert.deepEqual(cookieNames(await get(`/run/${ids.cookies}`, 'lambda.localhost')), expected);
    assert.deepEqual(cookieNames(await get('/mux/user-owner/cookies', 'api.localhost')), expected);
    assert.deepEqual(cookieNames(await get('/p/cookies', 'shop.localhost', { 'x-project-id': 'proj-shop' })), expected);
    // The owner's test run reports the same cookies a real request would get.
    const tested = await service.app.inject({
      method: 'POST',
      url: `/api/v0/lambdas/${ids.cookies}/invoke`,
      headers: { ...owner, 'content-type': 'application/json' },
      payload: '{}',
    });
    assert.equal(tested.statusCode, 200, tested.body);
    const setCookie = tested.json<{ headers: Record<string, string> }>().headers['set-cookie'] ?? '';
    assert.doesNotMatch(setCookie, /stratus_session|stratus_sso/i);
    assert.match(setCookie, /theme=dark/);
  });

  it('uses the configured domain to tell platform hosts from project hosts', async () => {
    const other = await startTestService(lambdaServiceWith({ timeoutMs: 2000, memoryLimitMiB: 64, prewarm: 0 }), {
      domain: 'example.test',
    });
    try {
      await other.store.sql.database.write(function* () {
        yield* run('create table apikeys_project_owners (project_id text not null, user_id text not null)');
        yield* run(`insert into apikeys_project_owners (project_id, user_id) values ('proj-x', 'user-owner')`);
      });
      const made = await other.app.inject({
        method: 'POST',
        url: '/api/v0/lambdas',
        headers: { ...owner, 'x-project-id': 'proj-x', host: 'site.example.test', 'content-type': 'application/json' },
        payload: JSON.stringify({ name: 'p', method: 'GET', path: '/', code: '1' }),
      });
      assert.equal(made.statusCode, 201, made.body);
      const onProject = await other.app.inject({
        method: 'GET',
        url: '/',
        headers: { host: 'site.example.test', 'x-project-id': 'proj-x' },
      });
      assert.equal(onProject.statusCode, 200);
      assert.equal(onProject.headers['content-security-policy'], undefined);
      for (const host of ['example.test', 'lambda.example.test', 'API.Example.Test:443', '127.0.0.2']) {
        const res = await other.app.inject({
          method: 'GET',
          url: `/run/${made.json<{ id: string }>().id}`,
          headers: { host },
        });
        assert.equal(res.statusCode, 200, host);
        assert.equal(res.headers['content-security-policy'], SANDBOX, host);
      }
      // Under another domain setting, `site.localhost` is no project host of this platform.
      const foreign = await other.app.inject({
        method: 'GET',
        url: '/',
        headers: { host: 'site.localhost', 'x-project-id': 'proj-x' },
      });
      assert.equal(foreign.headers['content-security-policy'], SANDBOX);
    } finally {
      await other.close();
    }
  });

  describe('visitor identity', () => {
    const visitor = asUser('user-visitor', {
      user: { id: 'user-visitor', email: 'vi@example.com', nick: 'vi', picture: 'https://example.com/p.png' },
      session: { id: 'session-secret-id' },
      auth: { method: 'api_key', key: 'key-id-123', host_metadata: 'meta' },
      project: { id: 'proj-other', slug: 'other' },
    });
    const seenBy = async (url: string, headers: Record<string, string>) => {
      const res = await get(url, 'lambda.localhost', headers);
      assert.equal(res.statusCode, 200, res.body);
      return res.json<{ identity: string | null; cookie: string | null }>();
    };

    it('gives /run, /mux and project-host lambdas only the id and email of a signed-in visitor', async () => {
      for (const [url, extra] of [
        [`/run/${ids.seen}`, {}],
        ['/mux/user-owner/seen', {}],
        ['/p/seen', { 'x-project-id': 'proj-shop', host: 'shop.localhost' }],
      ] as const) {
        const seen = await seenBy(url, { ...visitor, ...extra });
        assert.deepEqual(
          JSON.parse(seen.identity ?? 'null'),
          { user: { id: 'user-visitor', email: 'vi@example.com' } },
          url,
        );
        assert.doesNotMatch(seen.identity ?? '', /session-secret-id|key-id-123|api_key|meta|nick|picture/);
      }
    });

    it('gives the id alone when the visitor has no email, and nothing to an anonymous visit', async () => {
      const idOnly = await seenBy(`/run/${ids.seen}`, asUser('user-plain', { session: { id: 's-1' } }));
      assert.deepEqual(JSON.parse(idOnly.identity ?? 'null'), { user: { id: 'user-plain' } });
      assert.equal((await seenBy(`/run/${ids.seen}`, {})).identity, null);
      // An identity header without a usable user is no identity.
      assert.equal(
        (await seenBy(`/run/${ids.seen}`, { 'x-gateway-authentication': '{"session":{"id":"s"}}' })).identity,
        null,
      );
    });

    it('never passes platform cookies to a lambda, even from a caller the gateway did not filter', async () => {
      const seen = await seenBy(`/run/${ids.seen}`, {
        cookie: 'stratus_session=secret-token; theme=dark; __Host-stratus_x=1; __Secure-Stratus_y=2; lang=en',
      });
      assert.equal(seen.cookie, 'theme=dark; lang=en');
      assert.equal((await seenBy(`/run/${ids.seen}`, { cookie: 'stratus_session=secret-token' })).cookie, null);
    });

    it("reduces the owner's own identity on /api/v0/run the same way", async () => {
      const res = await service.app.inject({
        method: 'GET',
        url: `/api/v0/run/${ids.seen}`,
        headers: asUser('user-owner', { session: { id: 'owner-session' }, auth: { method: 'session' } }),
      });
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(JSON.parse(res.json<{ identity: string }>().identity), { user: { id: 'user-owner' } });
    });
  });
});

describe('lambda output through the gateway', () => {
  let platform: TestPlatform;
  before(async () => {
    platform = await startTestPlatform();
  });
  after(async () => {
    await platform.close();
  });

  it('sandboxes /run on lambda.<domain> and the bare host, and serves a project host unsandboxed', async () => {
    const owner = {
      'x-gateway-authentication': JSON.stringify({ user: { id: 'gw-owner' } }),
      'content-type': 'application/json',
    };
    const project = await platform.callInternal({
      method: 'POST',
      path: '/v0/projects',
      host: 'apikeys.localhost',
      headers: owner,
      body: '{"name":"Site","slug":"site"}',
    });
    assert.equal(project.status, 201, project.text);
    const made = await platform.callInternal({
      method: 'POST',
      path: '/api/v0/lambdas',
      host: 'site.localhost',
      headers: owner,
      body: JSON.stringify({
        name: 'home',
        method: 'GET',
        path: '/',
        code: 'export default () => new Response("<p>home</p>", { headers: { "content-type": "text/html", "set-cookie": "stratus_session=fixated; Path=/" } })',
      }),
    });
    assert.equal(made.status, 201, made.text);
    const id = made.json<{ id: string }>().id;
    for (const host of ['lambda.localhost', 'localhost', '127.0.0.1']) {
      const res = await platform.call({ path: `/run/${id}`, host });
      assert.equal(res.status, 200, `${host}: ${res.text}`);
      assert.equal(res.headers['content-security-policy'], SANDBOX, host);
      assert.equal(res.headers['x-content-type-options'], 'nosniff', host);
      assert.equal(res.headers['set-cookie'], undefined, host);
    }
    const home = await platform.call({ path: '/', host: 'site.localhost' });
    assert.equal(home.status, 200, home.text);
    assert.equal(home.text, '<p>home</p>');
    assert.equal(home.headers['content-security-policy'], undefined);
    assert.equal(home.headers['x-content-type-options'], 'nosniff');
    assert.equal(home.headers['set-cookie'], undefined);
  });
});
