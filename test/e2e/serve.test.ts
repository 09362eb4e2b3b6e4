import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/http.ts';
import { runCli, serve, type ServedProcess } from '../helpers/serve.ts';

/** Every service of the platform, in the order /v0/status lists them (src/config.ts SERVICE_NAMES). */
const PLATFORM = ['auth', 'apikeys', 'lambda', 'scheduler', 'docdb', 'logs', 'files', 'config', 'run', 'kv', 'console'];

/** The services the process says it started (its ready line). */
const startedServices = (server: ServedProcess): string[] => {
  const listed = /; services ([^;]*);/.exec(server.output())?.[1];
  assert.ok(listed, `no services in the ready line:\n${server.output()}`);
  return listed.split(',');
};

const asUser = (id: string) => ({ 'x-gateway-authentication': JSON.stringify({ user: { id } }) });

describe('stratus serve, end to end over HTTP', () => {
  let database: TestDatabase;
  let server: ServedProcess;
  let env: Record<string, string | undefined>;

  before(async () => {
    database = await createTestDatabase();
    env = { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl };
    server = await serve([], env);
  });

  after(async () => {
    assert.equal(await server.stop(), 0, 'a clean SIGTERM shutdown exits 0');
    await database.cleanup();
  });

  it('answers the README curl: config.localhost/v0/configs is a JSON array', async () => {
    const res = await request(server.publicPort, { path: '/v0/configs', host: 'config.localhost:8080' });
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.ok(Array.isArray(res.json()));
  });

  it('creates and reads config objects through the public port, on both hosts', async () => {
    const created = await request(server.publicPort, {
      method: 'POST',
      path: '/v0/configs',
      host: 'api.localhost',
      body: '{"id":"e2e","entries":{"a":1}}',
    });
    assert.equal(created.status, 201);
    const viaConfigHost = await request(server.publicPort, { path: '/v0/configs/e2e', host: 'config.localhost' });
    assert.deepEqual(viaConfigHost.json(), { id: 'e2e', entries: { a: 1 } });
  });

  it('drops forged identity on the public port and trusts it on the internal port', async () => {
    const forged = await request(server.publicPort, {
      path: '/v1/config',
      host: 'config.localhost',
      headers: asUser('mallory'),
    });
    assert.equal(forged.status, 401);
    const patched = await request(server.internalPort, {
      method: 'PATCH',
      path: '/v1/config',
      host: 'config.localhost',
      headers: asUser('ada'),
      body: '{"theme":"dark"}',
    });
    assert.equal(patched.status, 200);
    assert.deepEqual(patched.json(), { entries: { theme: 'dark' } });
    const keys = await request(server.publicPort, {
      path: '/v0/apikeys',
      host: 'apikeys.localhost',
      headers: asUser('ada'),
    });
    assert.equal(keys.status, 401, 'the apikeys service sees no identity through the public port');
    const viaInternal = await request(server.internalPort, {
      path: '/v0/apikeys',
      host: 'api.localhost',
      headers: asUser('ada'),
    });
    assert.equal(viaInternal.status, 200);
    assert.deepEqual(viaInternal.json(), { api_keys: [] });
  });

  it('serves each service its own OpenAPI document and the gateway version', async () => {
    const doc = (await request(server.publicPort, { path: '/openapi.json', host: 'config.localhost' })).json<{
      paths: Record<string, unknown>;
    }>();
    assert.deepEqual(Object.keys(doc.paths).sort(), ['/v0/configs', '/v0/configs/{id}', '/v1/config', '/version']);
    const apikeysDoc = (await request(server.publicPort, { path: '/openapi.json', host: 'apikeys.localhost' })).json<{
      paths: Record<string, unknown>;
    }>();
    assert.ok(
      Object.keys(apikeysDoc.paths).every(
        (p) => p.startsWith('/v0/apikeys') || p.startsWith('/v0/projects') || p === '/version',
      ),
      Object.keys(apikeysDoc.paths).join(),
    );
    const version = await request(server.publicPort, { path: '/version', host: 'gateway.localhost' });
    assert.match(version.text, /^\d+\.\d+\.\d+$/);
  });

  it('reports every service of the whole platform healthy in /v0/status', async () => {
    // Without --services, the process starts the whole platform and says so.
    assert.deepEqual(startedServices(server), PLATFORM);
    const res = await request(server.publicPort, { path: '/v0/status', host: 'gateway.localhost' });
    assert.equal(res.status, 200);
    const rows = res.json<{ id: string; name: string; status: number }[]>();
    // One row per service, in order, and nothing else (no project rows for an anonymous caller).
    assert.deepEqual(
      rows.map((row) => row.id),
      PLATFORM,
    );
    const unhealthy = rows.filter((row) => row.status !== 200);
    assert.deepEqual(unhealthy, []);
  });

  it('answers no_route envelopes', async () => {
    const unknown = await request(server.publicPort, { path: '/', host: 'nowhere.example' });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json<{ error: { code: string } }>().error.code, 'no_route');
    // (service_unavailable for a service not running here: `--services` below.)
    // The lambda service answers on api.<domain> (identity required there).
    const lambda = await request(server.publicPort, { path: '/api/v0/lambdas', host: 'api.localhost' });
    assert.equal(lambda.status, 401);
  });
});

describe('stratus serve --services: each service starts alone', () => {
  for (const [only, other] of [
    ['config', 'apikeys'],
    ['apikeys', 'config'],
  ] as const) {
    it(`runs only ${only}`, async () => {
      const database = await createTestDatabase();
      const server = await serve(['--services', only], {
        DATA_DIR: database.dataDir,
        DATABASE_URL: database.databaseUrl,
      });
      try {
        assert.match(server.output(), new RegExp(`services ${only};`));
        const own = await request(server.internalPort, {
          path: only === 'config' ? '/v0/configs' : '/v0/projects',
          host: `${only}.localhost`,
          headers: asUser('u1'),
        });
        assert.equal(own.status, 200);
        const doc = (await request(server.publicPort, { path: '/openapi.json', host: `${only}.localhost` })).json<{
          info: { title: string };
        }>();
        assert.equal(doc.info.title, `Stratus ${only}`);
        const missing = await request(server.publicPort, { path: '/', host: `${other}.localhost` });
        assert.equal(missing.status, 503);
        // /v0/status still lists every service: this one healthy, the ones not started 503.
        assert.deepEqual(startedServices(server), [only]);
        const rows = (await request(server.publicPort, { path: '/v0/status', host: 'gateway.localhost' })).json<
          { id: string; status: number }[]
        >();
        assert.deepEqual(
          rows.map((row) => row.id),
          PLATFORM,
        );
        assert.deepEqual(
          rows.filter((row) => row.status === 200).map((row) => row.id),
          [only],
        );
        assert.equal(rows.find((row) => row.id === other)?.status, 503);
      } finally {
        await server.stop();
        await database.cleanup();
      }
    });
  }

  it('refuses bad settings with a clear message and exit code 2', async () => {
    const result = await runCli(['serve', '--port', 'eighty'], {});
    assert.equal(result.code, 2);
    assert.match(result.output, /--port: "eighty" is not a port number/);
    const unknown = await runCli(['serve', '--services', 'config,teleport'], {});
    assert.equal(unknown.code, 2);
    assert.match(unknown.output, /unknown service "teleport"/);
  });

  it('migrates with `stratus migrate`, then finds nothing left to do', async () => {
    const database = await createTestDatabase();
    try {
      const env = { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl };
      // Two instances starting together: both succeed and each migration is applied once.
      const [first, racing] = await Promise.all([runCli(['migrate'], env), runCli(['migrate'], env)]);
      assert.equal(first.code, 0, first.output);
      assert.equal(racing.code, 0, racing.output);
      const output = first.output + racing.output;
      assert.equal(output.match(/config\/001_/g)?.length, 1, output);
      assert.equal(output.match(/apikeys\/001_/g)?.length, 1, output);
      const second = await runCli(['migrate'], env);
      assert.equal(second.code, 0);
      assert.match(second.output, /up to date/);
    } finally {
      await database.cleanup();
    }
  });
});

describe('durability: acknowledged writes survive SIGKILL and restart', () => {
  it('keeps every acknowledged write', async () => {
    const database = await createTestDatabase();
    const env = { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl };
    let server = await serve([], env);
    const acknowledged: string[] = [];
    try {
      // Writes in flight when the process dies: only those answered 201/200 must be there.
      const writes = Array.from({ length: 60 }, async (_, i) => {
        const res = await request(server.publicPort, {
          method: 'POST',
          path: '/v0/configs',
          host: 'config.localhost',
          body: JSON.stringify({ id: `w${i}`, entries: { i } }),
        });
        if (res.status === 201) acknowledged.push(`w${i}`);
      });
      await Promise.all(writes);
      const patch = await request(server.internalPort, {
        method: 'PATCH',
        path: '/v1/config',
        host: 'config.localhost',
        headers: asUser('durable'),
        body: '{"kept":true}',
      });
      assert.equal(patch.status, 200);
      const key = await request(server.internalPort, {
        method: 'POST',
        path: '/v0/apikeys',
        host: 'apikeys.localhost',
        headers: asUser('durable'),
        body: '{"name":"survivor"}',
      });
      assert.equal(key.status, 201);
      await server.kill();

      server = await serve([], env);
      const list = (await request(server.publicPort, { path: '/v0/configs', host: 'config.localhost' })).json<
        { id: string }[]
      >();
      const ids = new Set(list.map((c) => c.id));
      assert.equal(acknowledged.length, 60);
      for (const id of acknowledged) assert.ok(ids.has(id), `${id} survived`);
      const user = await request(server.internalPort, {
        path: '/v1/config',
        host: 'config.localhost',
        headers: asUser('durable'),
      });
      assert.deepEqual(user.json(), { entries: { kept: true } });
      const keys = await request(server.internalPort, {
        path: '/v0/apikeys',
        host: 'apikeys.localhost',
        headers: asUser('durable'),
      });
      assert.deepEqual(
        keys.json<{ api_keys: { name: string }[] }>().api_keys.map((k) => k.name),
        ['survivor'],
      );
    } finally {
      await server.stop();
      await database.cleanup();
    }
  });
});

describe('sessions across a restart', () => {
  it('keeps a session through SIGKILL and restart, and logout ends it', async () => {
    const database = await createTestDatabase();
    const env = {
      DATA_DIR: database.dataDir,
      DATABASE_URL: database.databaseUrl,
      ADMIN_EMAIL: 'admin@example.com',
      ADMIN_PASSWORD: 'a long enough password',
    };
    let server = await serve([], env);
    try {
      const login = await request(server.publicPort, {
        method: 'POST',
        path: '/v0/login',
        host: 'auth.localhost',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'admin@example.com', password: 'a long enough password' }),
      });
      assert.equal(login.status, 200, login.text);
      const cookie = String(login.headers['set-cookie']).split(';')[0]!;
      const { token } = login.json<{ token: string }>();
      assert.equal(
        (await request(server.publicPort, { path: '/v0/secret', host: 'gateway.localhost', headers: { cookie } }))
          .status,
        200,
      );
      await server.kill();

      server = await serve([], env);
      assert.equal(
        (await request(server.publicPort, { path: '/v0/secret', host: 'gateway.localhost', headers: { cookie } }))
          .status,
        200,
        'the cookie works after a restart',
      );
      assert.equal(
        (
          await request(server.publicPort, {
            path: '/v0/secret',
            host: 'api.localhost',
            headers: { authorization: `Bearer ${token}` },
          })
        ).status,
        200,
        'so does the token',
      );
      const logout = await request(server.publicPort, {
        method: 'POST',
        path: '/v0/logout',
        host: 'auth.localhost',
        headers: { cookie },
      });
      assert.equal(logout.status, 204);
      assert.equal(
        (await request(server.publicPort, { path: '/v0/secret', host: 'gateway.localhost', headers: { cookie } }))
          .status,
        401,
      );
      assert.equal(
        (
          await request(server.publicPort, {
            path: '/v0/secret',
            host: 'gateway.localhost',
            headers: { authorization: `Bearer ${token}` },
          })
        ).status,
        401,
      );
    } finally {
      await server.stop();
      await database.cleanup();
    }
  });
});
