import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { apikeysService } from '../../../src/services/apikeys/index.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';
import { assertError, countRows } from './helpers.ts';

let service: TestService;

before(async () => {
  service = await startTestService(apikeysService);
});

after(async () => {
  await service.close();
});

/** The identity header the gateway injects for a caller who presented an API key. */
function viaKey(user: string, key: string): Record<string, string> {
  return asUser(user, { auth: { method: 'api_key', key } });
}

async function createKey(headers: Record<string, string>, body: object): Promise<{ key: string; secret: string }> {
  const response = await service.app.inject({ method: 'POST', url: '/v0/apikeys', headers, payload: body });
  assert.equal(response.statusCode, 201, response.body);
  return response.json() as { key: string; secret: string };
}

async function createProject(headers: Record<string, string>, slug: string): Promise<{ id: string }> {
  const response = await service.app.inject({
    method: 'POST',
    url: '/v0/projects',
    headers,
    payload: { name: slug, slug },
  });
  assert.equal(response.statusCode, 201, response.body);
  return response.json() as { id: string };
}

describe('identity', () => {
  const routes: Array<{ method: 'GET' | 'POST' | 'DELETE'; url: string; payload?: string }> = [
    { method: 'POST', url: '/v0/apikeys', payload: '{"name":"k"}' },
    { method: 'GET', url: '/v0/apikeys' },
    { method: 'DELETE', url: '/v0/apikeys/00000000-0000-4000-8000-000000000000' },
    { method: 'POST', url: '/v0/projects', payload: '{"name":"p"}' },
    { method: 'GET', url: '/v0/projects' },
    { method: 'GET', url: '/v0/projects/project-1' },
    { method: 'DELETE', url: '/v0/projects/project-1' },
  ];
  const badHeaders: Array<[string, Record<string, string>]> = [
    ['no identity header', {}],
    ['identity not JSON', { 'x-gateway-authentication': 'user-1' }],
    ['identity without user', { 'x-gateway-authentication': '{"session":{"id":"s"}}' }],
    ['user.id not a string', { 'x-gateway-authentication': '{"user":{"id":42}}' }],
    ['user.id empty', { 'x-gateway-authentication': '{"user":{"id":""}}' }],
    ['identity a JSON string', { 'x-gateway-authentication': '"user-1"' }],
  ];
  for (const { method, url, payload } of routes) {
    test(`${method} ${url} → 401 unauthorized without a usable identity`, async () => {
      for (const [label, headers] of badHeaders) {
        const response = await service.app.inject({
          method,
          url,
          headers: { ...headers, 'content-type': 'application/json' },
          payload,
        });
        assert.equal(response.statusCode, 401, `${label}: ${response.body}`);
        assertError(response, 401, 'unauthorized');
      }
    });
  }

  test('401 comes before body checks: invalid JSON or fields from an anonymous caller → 401', async () => {
    for (const payload of ['{not json', '{"name":"k","extra":1}']) {
      const response = await service.app.inject({
        method: 'POST',
        url: '/v0/apikeys',
        headers: { 'content-type': 'application/json' },
        payload,
      });
      assertError(response, 401, 'unauthorized');
    }
    assert.equal(await countRows(service, 'apikeys_keys'), 0);
    assert.equal(await countRows(service, 'apikeys_projects'), 0);
  });

  test('an unknown path is 404 not_found, identity or not', async () => {
    assertError(await service.app.inject({ method: 'GET', url: '/v0/nothing' }), 404, 'not_found');
    assertError(
      await service.app.inject({ method: 'GET', url: '/v0/nothing', headers: asUser('u') }),
      404,
      'not_found',
    );
  });
});

describe('callers authenticated by an API key', () => {
  const owner = 'user-keyholder';
  let unscoped: { key: string };
  let scoped: { key: string };
  let project: { id: string };

  before(async () => {
    unscoped = await createKey(asUser(owner), { name: 'root key' });
    scoped = await createKey(asUser(owner), { name: 'ci key', scopes: [{ projects: ['project-x'], host_rules: {} }] });
    project = await createProject(asUser(owner), 'key-caller-project');
  });

  test('a scoped key cannot create, change or delete keys or projects → 403 forbidden, nothing changes', async () => {
    const headers = viaKey(owner, scoped.key);
    const keysBefore = await countRows(service, 'apikeys_keys');
    const projectsBefore = await countRows(service, 'apikeys_projects');
    const attempts = [
      service.app.inject({ method: 'POST', url: '/v0/apikeys', headers, payload: { name: 'escalate' } }),
      service.app.inject({ method: 'DELETE', url: `/v0/apikeys/${unscoped.key}`, headers }),
      service.app.inject({ method: 'DELETE', url: `/v0/apikeys/${scoped.key}`, headers }),
      service.app.inject({ method: 'POST', url: '/v0/projects', headers, payload: { name: 'sneaky' } }),
      service.app.inject({ method: 'DELETE', url: `/v0/projects/${project.id}`, headers }),
      service.app.inject({
        method: 'PATCH',
        url: `/v0/projects/${project.id}`,
        headers,
        payload: { allowed_origins: ['https://evil.example'] },
      }),
    ];
    for (const response of await Promise.all(attempts)) {
      assert.match(assertError(response, 403, 'forbidden'), /scope/);
    }
    assert.equal(await countRows(service, 'apikeys_keys'), keysBefore);
    assert.equal(await countRows(service, 'apikeys_projects'), projectsBefore);
    assert.equal(await countRows(service, 'apikeys_project_origins'), 0);
  });

  test('a scoped key may still list keys and list or get projects', async () => {
    const headers = viaKey(owner, scoped.key);
    const keys = await service.app.inject({ method: 'GET', url: '/v0/apikeys', headers });
    assert.equal(keys.statusCode, 200);
    assert.equal((keys.json() as { api_keys: unknown[] }).api_keys.length, 2);
    const list = await service.app.inject({ method: 'GET', url: '/v0/projects', headers });
    assert.equal(list.statusCode, 200);
    assert.deepEqual(
      (list.json() as Array<{ id: string }>).map((p) => p.id),
      [project.id],
    );
    const one = await service.app.inject({ method: 'GET', url: `/v0/projects/${project.id}`, headers });
    assert.equal(one.statusCode, 200);
  });

  test('an unscoped key may create and delete keys and projects', async () => {
    const headers = viaKey(owner, unscoped.key);
    const minted = await createKey(headers, { name: 'minted', scopes: [{ host_rules: { 'a.localhost': '{}' } }] });
    const removed = await service.app.inject({ method: 'DELETE', url: `/v0/apikeys/${minted.key}`, headers });
    assert.equal(removed.statusCode, 200);
    const made = await createProject(headers, 'made-by-key');
    const deleted = await service.app.inject({ method: 'DELETE', url: `/v0/projects/${made.id}`, headers });
    assert.equal(deleted.statusCode, 200);
  });

  test('a key that is revoked, unknown, missing or not the caller’s → 403', async () => {
    const doomed = await createKey(asUser(owner), { name: 'doomed' });
    assert.equal(
      (await service.app.inject({ method: 'DELETE', url: `/v0/apikeys/${doomed.key}`, headers: asUser(owner) }))
        .statusCode,
      200,
    );
    const someoneElses = await createKey(asUser('user-elsewhere'), { name: 'theirs' });
    const identities = [
      viaKey(owner, doomed.key),
      viaKey(owner, '00000000-0000-4000-8000-000000000000'),
      asUser(owner, { auth: { method: 'api_key' } }),
      viaKey(owner, someoneElses.key),
    ];
    for (const headers of identities) {
      assertError(
        await service.app.inject({ method: 'POST', url: '/v0/apikeys', headers, payload: { name: 'x' } }),
        403,
        'forbidden',
      );
    }
  });

  test('sessions and bearer tokens are not restricted', async () => {
    for (const method of ['session', 'bearer']) {
      const headers = asUser(owner, { auth: { method, key: scoped.key } });
      const created = await createKey(headers, { name: `via ${method}` });
      assert.ok(created.secret);
    }
  });
});

describe('GET /openapi.json', () => {
  test('is public and documents every route, with secrets only in the create response', async () => {
    const response = await service.app.inject({ method: 'GET', url: '/openapi.json' });
    assert.equal(response.statusCode, 200);
    const doc = response.json() as {
      openapi: string;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
      paths: Record<
        string,
        Record<
          string,
          {
            responses: Record<
              string,
              { content?: Record<string, { schema: { properties?: Record<string, unknown> } }> }
            >;
          }
        >
      >;
    };
    assert.match(doc.openapi, /^3\./);
    assert.deepEqual(Object.keys(doc.paths['/v0/apikeys'] ?? {}).sort(), ['get', 'post']);
    assert.deepEqual(Object.keys(doc.paths['/v0/apikeys/{key}'] ?? {}).sort(), ['delete']);
    assert.deepEqual(Object.keys(doc.paths['/v0/projects'] ?? {}).sort(), ['get', 'post']);
    assert.deepEqual(Object.keys(doc.paths['/v0/projects/{id}'] ?? {}).sort(), ['delete', 'get', 'patch']);

    // Shared shapes are named schemas: follow a reference to its component.
    const schemaOf = (path: string, method: string, status: string) => {
      const schema = doc.paths[path]?.[method]?.responses[status]?.content?.['application/json']?.schema as
        { $ref?: string; properties?: Record<string, unknown> } | undefined;
      return schema?.$ref ? doc.components.schemas[schema.$ref.split('/').pop()!] : schema;
    };
    assert.ok(schemaOf('/v0/apikeys', 'post', '201')?.properties?.secret, 'create documents the secret');
    const list = JSON.stringify(schemaOf('/v0/apikeys', 'get', '200'));
    assert.ok(list.includes('api_keys'));
    assert.ok(!/"(secret|secret_hash|owner)":/.test(list), 'the list schema has no secret, hash or owner property');
    assert.ok(schemaOf('/v0/projects/{id}', 'get', '200')?.properties?.host);
  });
});
