import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createSession, createUser } from '../../src/services/auth/repository.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

// Decision 8 and contract rule 7: on the internal port the key-value node checks only that
// credentials are present (403 `forbidden` otherwise); on the public port the gateway verifies them.

const HOST = 'kv.localhost';
const ROUTES: [string, string, string?][] = [
  ['GET', '/v1/status'],
  ['GET', '/v1/metrics'],
  ['GET', '/v1/collections'],
  ['POST', '/v1/collections', '{"name":"presence"}'],
  ['GET', '/v1/collections/presence/keys'],
  ['POST', '/v1/collections/presence/keys/k', '{"value":1}'],
  ['GET', '/v1/collections/presence/keys/k'],
  ['DELETE', '/v1/collections/presence/keys/k'],
  ['DELETE', '/v1/collections/presence'],
];
const PRESENT: Record<string, Record<string, string>> = {
  'X-Gateway-Authentication': { 'x-gateway-authentication': 'anything' },
  'apikey + secret': { apikey: 'any', secret: 'values' },
  'Api-Key + Api-Secret': { 'api-key': 'any', 'api-secret': 'values' },
};
const ABSENT: Record<string, Record<string, string>> = {
  none: {},
  'apikey alone': { apikey: 'any' },
  'secret alone': { secret: 'any' },
  'Api-Key alone': { 'api-key': 'any' },
  'Api-Secret alone': { 'api-secret': 'any' },
  'apikey + Api-Secret (not a pair)': { apikey: 'any', 'api-secret': 'any' },
  'empty values': { apikey: '', secret: '' },
};

describe('key-value node: presence-only credentials on the internal port', () => {
  let t: TestPlatform;

  before(async () => {
    t = await startTestPlatform();
  });

  after(async () => {
    await t.close();
  });

  it('answers 403 forbidden on every /v1 route without a credential pair, and changes nothing', async () => {
    for (const [label, headers] of Object.entries(ABSENT)) {
      for (const [method, path, body] of ROUTES) {
        const res = await t.callInternal({ method, path, host: HOST, headers, ...(body ? { body } : {}) });
        assert.equal(res.status, 403, `${label}: ${method} ${path} → ${res.status} ${res.text}`);
        assert.equal(res.json<{ error: { code: string } }>().error.code, 'forbidden');
      }
    }
    const listed = await t.callInternal({ path: '/v1/collections', host: HOST, headers: PRESENT['apikey + secret']! });
    assert.deepEqual(listed.json(), { collections: [] });
  });

  for (const [label, headers] of Object.entries(PRESENT)) {
    it(`serves every route with ${label} present, whatever the values`, async () => {
      for (const [method, path, body] of ROUTES) {
        const res = await t.callInternal({ method, path, host: HOST, headers, ...(body ? { body } : {}) });
        assert.equal(res.status, 200, `${method} ${path} → ${res.status} ${res.text}`);
      }
    });
  }

  it('keeps the health checks public on both ports', async () => {
    for (const path of ['/healthz', '/livez', '/readyz', '/startupz']) {
      assert.equal((await t.callInternal({ path, host: HOST })).status, 200, `internal ${path}`);
      assert.equal((await t.call({ path, host: HOST })).status, 200, `public ${path}`);
    }
  });

  it('keeps `require` on the public port: presence is not enough there', async () => {
    for (const headers of [
      {},
      PRESENT['apikey + secret']!,
      PRESENT['Api-Key + Api-Secret']!,
      PRESENT['X-Gateway-Authentication']!,
    ]) {
      const res = await t.call({ path: '/v1/collections', host: HOST, headers });
      assert.equal(res.status, 401, `${JSON.stringify(headers)} → ${res.status} ${res.text}`);
    }
  });
});

describe('key-value node: tenants kept apart on the public port (issue 17, item 4; decision 46)', () => {
  let t: TestPlatform;
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  let ada: Record<string, string>;
  let bob: Record<string, string>;
  let adaId: string;

  before(async () => {
    t = await startTestPlatform();
    const sql = t.platform.store.sql;
    const adaUser = await createUser(sql, { email: 'ada-kv@example.com' });
    const bobUser = await createUser(sql, { email: 'bob-kv@example.com' });
    adaId = adaUser.id;
    ada = bearer((await createSession(sql, adaUser.id)).token);
    bob = bearer((await createSession(sql, bobUser.id)).token);
  });

  after(async () => {
    await t.close();
  });

  const kv = (headers: Record<string, string>, method: string, path: string, body?: unknown) =>
    t.call({ method, path, host: HOST, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

  it('gives every signed-in user a namespace of their own: no listing, reading or overwriting across users', async () => {
    assert.equal((await kv(ada, 'POST', '/v1/collections', { name: 'settings' })).status, 200);
    assert.equal((await kv(ada, 'POST', '/v1/collections/settings/keys/theme', { value: 'dark' })).status, 200);
    assert.deepEqual(
      (await kv(bob, 'GET', '/v1/collections')).json(),
      { collections: [] },
      "bob does not see ada's collection",
    );
    assert.equal((await kv(bob, 'GET', '/v1/collections/settings/keys/theme')).status, 404);
    assert.equal(
      (await kv(bob, 'POST', '/v1/collections/settings/keys/theme', { value: 'pwned' })).status,
      404,
      'no collection of that name in his namespace',
    );
    assert.equal(
      (await kv(bob, 'POST', '/v1/collections', { name: 'settings' })).status,
      200,
      'the same name is free for him',
    );
    assert.equal((await kv(bob, 'POST', '/v1/collections/settings/keys/theme', { value: 'light' })).status, 200);
    assert.equal((await kv(bob, 'DELETE', '/v1/collections/settings')).status, 200);
    assert.deepEqual(
      (await kv(ada, 'GET', '/v1/collections/settings/keys/theme')).json<{ value: unknown }>().value,
      'dark',
      "ada's value is untouched",
    );
    const status = (await kv(bob, 'GET', '/v1/status')).json<{ collections: unknown }>();
    assert.deepEqual(status.collections, {}, "status shows the caller's own collections");
    assert.deepEqual(Object.keys((await kv(ada, 'GET', '/v1/status')).json<{ collections: object }>().collections), [
      'settings',
    ]);
  });

  it('keeps the internal port presence-only: a trusted caller names the namespace', async () => {
    const internal = await t.callInternal({
      path: '/v1/collections/settings/keys/theme',
      host: HOST,
      headers: { apikey: 'x', secret: 'y', 'x-project-id': adaId },
    });
    assert.equal(internal.status, 200);
    assert.equal(internal.json<{ value: unknown }>().value, 'dark');
    const forged = await kv({ ...bob, 'x-project-id': adaId }, 'GET', '/v1/collections/settings/keys/theme');
    assert.equal(forged.status, 404, 'the public port drops a client-sent X-Project-Id');
  });

  it('puts a key bound to one project in that project, not in its owner namespace', async () => {
    const project = await t.callInternal({
      method: 'POST',
      path: '/v0/projects',
      host: 'apikeys.localhost',
      headers: {
        'x-gateway-authentication': JSON.stringify({ user: { id: adaId } }),
        'content-type': 'application/json',
      },
      body: '{"name":"kvproj","slug":"kvproj"}',
    });
    assert.equal(project.status, 201, project.text);
    const projectId = project.json<{ id: string }>().id;
    const key = await t.callInternal({
      method: 'POST',
      path: '/v0/apikeys',
      host: 'apikeys.localhost',
      headers: {
        'x-gateway-authentication': JSON.stringify({ user: { id: adaId } }),
        'content-type': 'application/json',
      },
      body: JSON.stringify({ name: 'kv', scopes: [{ projects: [projectId] }] }),
    });
    assert.equal(key.status, 201, key.text);
    const { key: id, secret } = key.json<{ key: string; secret: string }>();
    const withKey = { 'api-key': id, 'api-secret': secret };
    assert.deepEqual(
      (await kv(withKey, 'GET', '/v1/collections')).json(),
      { collections: [] },
      "the project's namespace, not ada's",
    );
    assert.equal((await kv(withKey, 'POST', '/v1/collections', { name: 'project-data' })).status, 200);
    assert.deepEqual((await kv(ada, 'GET', '/v1/collections')).json(), { collections: ['settings'] });
    const internal = await t.callInternal({
      path: '/v1/collections',
      host: HOST,
      headers: { apikey: 'x', secret: 'y', 'x-project-id': projectId },
    });
    assert.deepEqual(internal.json(), { collections: ['project-data'] });
  });

  it('does not serve the replication feed, which carries every tenant, on the public port', async () => {
    const res = await kv(ada, 'GET', '/v1/replicate');
    assert.equal(res.status, 403);
    assert.equal(res.json<{ error: { code: string } }>().error.code, 'forbidden');
  });
});
