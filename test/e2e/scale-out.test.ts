import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { createTestDatabase, testDialect, type TestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/http.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';

const identity = (id: string) => ({ 'x-gateway-authentication': JSON.stringify({ user: { id } }) });

describe('a gateway in front of a service in another process', () => {
  let databases: TestDatabase[] = [];
  let gateway: ServedProcess;
  let backend: ServedProcess;

  before(async () => {
    // On PostgreSQL both processes share one database, as a scale-out deployment does; on SQLite
    // each has its own embedded store and only the proxying is under test.
    const shared = await createTestDatabase();
    databases = testDialect === 'postgres' ? [shared] : [shared, await createTestDatabase()];
    const backendDb = databases[databases.length - 1]!;
    backend = await serve(['--services', 'config'], {
      DATA_DIR: backendDb.dataDir,
      DATABASE_URL: backendDb.databaseUrl,
    });
    gateway = await serve(['--services', 'apikeys,auth'], {
      DATA_DIR: shared.dataDir,
      DATABASE_URL: shared.databaseUrl,
      UPSTREAM_CONFIG: `http://127.0.0.1:${backend.internalPort}`,
    });
  });

  after(async () => {
    await gateway?.stop();
    await backend?.stop();
    for (const database of databases) await database.cleanup();
  });

  it('proxies to the remote service with the identity the gateway established', async () => {
    const created = await request(gateway.internalPort, {
      method: 'POST',
      path: '/v0/apikeys',
      host: 'apikeys.localhost',
      headers: identity('user-remote'),
      body: '{"name":"remote"}',
    });
    assert.equal(created.status, 201);
    const { key, secret } = created.json<{ key: string; secret: string }>();
    const patched = await request(gateway.publicPort, {
      method: 'PATCH',
      path: '/v1/config',
      host: 'api.localhost',
      headers: { 'api-key': key, 'api-secret': secret, 'content-type': 'application/json' },
      body: '{"via":"gateway"}',
    });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(patched.json(), { entries: { via: 'gateway' } });
    const read = await request(backend.internalPort, {
      path: '/v1/config',
      host: 'config.localhost',
      headers: identity('user-remote'),
    });
    assert.deepEqual(read.json(), { entries: { via: 'gateway' } }, 'the backend stored it for the key owner');
    const forged = await request(gateway.publicPort, {
      path: '/v1/config',
      host: 'config.localhost',
      headers: identity('user-remote'),
    });
    assert.equal(forged.status, 401, 'a forged identity is still stripped before the remote hop');
  });

  it('streams request bodies through and reports upstream errors as envelopes', async () => {
    const big = JSON.stringify({ id: 'big', entries: { blob: 'x'.repeat(2 * 1024 * 1024) } });
    const created = await request(gateway.publicPort, {
      method: 'POST',
      path: '/v0/configs',
      host: 'config.localhost',
      headers: { 'content-type': 'application/json' },
      body: big,
    });
    assert.equal(created.status, 201);
    const unknown = await request(gateway.publicPort, { path: '/v0/configs/missing', host: 'config.localhost' });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json<{ error: { code: string } }>().error.code, 'not_found');
  });

  it('lists the remote service as healthy in /v0/status', async () => {
    const rows = (await request(gateway.publicPort, { path: '/v0/status', host: 'gateway.localhost' })).json<
      { id: string; status: number }[]
    >();
    assert.equal(rows.find((r) => r.id === 'config')?.status, 200);
    assert.equal(rows.find((r) => r.id === 'apikeys')?.status, 200);
    assert.equal(rows.find((r) => r.id === 'docdb')?.status, 503);
  });

  it(
    'revokes a key on every instance at once',
    { skip: testDialect !== 'postgres' && 'needs a shared PostgreSQL database' },
    async () => {
      const created = await request(gateway.internalPort, {
        method: 'POST',
        path: '/v0/apikeys',
        host: 'apikeys.localhost',
        headers: identity('user-revoke'),
        body: '{"name":"shared"}',
      });
      const { key, secret } = created.json<{ key: string; secret: string }>();
      const headers = { 'api-key': key, 'api-secret': secret };
      // Both instances check the key (and cache the success).
      for (const instance of [gateway, backend])
        assert.equal(
          (await request(instance.publicPort, { path: '/v0/secret', host: 'gateway.localhost', headers })).status,
          200,
        );
      const revoked = await request(gateway.publicPort, {
        method: 'DELETE',
        path: `/v0/apikeys/${key}`,
        host: 'api.localhost',
        headers,
      });
      assert.equal(revoked.status, 200);
      // At once: the next request on either instance is refused (the cache is fenced on the notifier).
      for (const instance of [backend, gateway])
        assert.equal(
          (await request(instance.publicPort, { path: '/v0/secret', host: 'gateway.localhost', headers })).status,
          401,
        );
    },
  );

  it('answers 502 when the remote service is down', async () => {
    const dataDir = `${databases[0]!.dataDir}-lonely`;
    const lonely = await serve(['--services', 'apikeys'], {
      DATA_DIR: dataDir,
      DATABASE_URL: undefined,
      UPSTREAM_CONFIG: 'http://127.0.0.1:9',
    });
    try {
      const res = await request(lonely.publicPort, { path: '/v0/configs', host: 'config.localhost' });
      assert.equal(res.status, 502);
      assert.equal(res.json<{ error: { code: string } }>().error.code, 'bad_gateway');
    } finally {
      await lonely.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
