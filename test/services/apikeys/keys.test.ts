import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { verify } from '@node-rs/bcrypt';
import { apikeysService } from '../../../src/services/apikeys/index.ts';
import { all, first } from '../../../src/store/sql-work.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';
import { assertError, nextMessage, UUID_V4 } from './helpers.ts';

let service: TestService;

before(async () => {
  service = await startTestService(apikeysService);
});

after(async () => {
  await service.close();
});

interface CreatedKey {
  key: string;
  secret: string;
  name: string;
  scopes: unknown[];
}

async function createKey(user: string, body: unknown): Promise<CreatedKey> {
  const response = await service.app.inject({
    method: 'POST',
    url: '/v0/apikeys',
    headers: asUser(user),
    payload: body as object,
  });
  assert.equal(response.statusCode, 201, response.body);
  return response.json() as CreatedKey;
}

async function listKeys(user: string): Promise<{ api_keys: Array<Record<string, unknown>> }> {
  const response = await service.app.inject({ method: 'GET', url: '/v0/apikeys', headers: asUser(user) });
  assert.equal(response.statusCode, 200, response.body);
  return response.json() as { api_keys: Array<Record<string, unknown>> };
}

async function storedHash(key: string): Promise<string | undefined> {
  const row = await service.store.sql.database.read(() =>
    first<{ secret_hash: string }>('select secret_hash from apikeys_keys where key = ?', key),
  );
  return row?.secret_hash;
}

describe('POST /v0/apikeys', () => {
  test('creates a key with the reference example and returns the secret once', async () => {
    const body = {
      name: 'CI/CD Key',
      scopes: [{ projects: ['project-123'], host_rules: { 'my-project.localhost': '{}' } }],
    };
    const response = await service.app.inject({
      method: 'POST',
      url: '/v0/apikeys',
      headers: asUser('user-create'),
      payload: body,
    });
    assert.equal(response.statusCode, 201);
    assert.equal(response.headers['content-type'], 'application/json; charset=utf-8');
    const created = response.json() as CreatedKey;
    assert.deepEqual(Object.keys(created).sort(), ['key', 'name', 'scopes', 'secret']);
    assert.match(created.key, UUID_V4);
    assert.match(created.secret, UUID_V4);
    assert.notEqual(created.key, created.secret);
    assert.equal(created.name, 'CI/CD Key');
    assert.deepEqual(created.scopes, body.scopes);
  });

  test('stores the secret only as a bcrypt hash of cost 10 that verifies', async () => {
    const created = await createKey('user-hash', { name: 'hashed' });
    const hash = await storedHash(created.key);
    assert.ok(hash, 'a row was stored');
    assert.match(hash, /^\$2[aby]\$10\$/);
    assert.notEqual(hash, created.secret);
    assert.ok(!hash.includes(created.secret));
    assert.equal(await verify(created.secret, hash), true);
    assert.equal(await verify(`${created.secret}x`, hash), false);
    const everything = await service.store.sql.database.read(() =>
      all('select * from apikeys_keys where key = ?', created.key),
    );
    assert.ok(!JSON.stringify(everything).includes(created.secret), 'the secret appears in no column');
  });

  test('defaults scopes to [] and fills in missing scope members', async () => {
    assert.deepEqual((await createKey('user-defaults', { name: 'no scopes' })).scopes, []);
    const created = await createKey('user-defaults', {
      name: 'partial',
      scopes: [{}, { projects: ['project-a'] }, { host_rules: { 'a.localhost': 'meta' } }],
    });
    const expected = [
      { projects: [], host_rules: {} },
      { projects: ['project-a'], host_rules: {} },
      { projects: [], host_rules: { 'a.localhost': 'meta' } },
    ];
    assert.deepEqual(created.scopes, expected);
    const listed = (await listKeys('user-defaults')).api_keys.find((k) => k.key === created.key);
    assert.deepEqual(listed?.scopes, expected, 'stored normalised');
  });

  test('accepts project ids that do not exist (yet)', async () => {
    const created = await createKey('user-future', {
      name: 'future',
      scopes: [{ projects: ['project-not-created-yet', 'anything'] }],
    });
    assert.deepEqual(created.scopes, [{ projects: ['project-not-created-yet', 'anything'], host_rules: {} }]);
  });

  test('keeps host rule order and odd host names as plain entries', async () => {
    const rules = JSON.parse('{"b.localhost":"1","a.localhost":"{\\"x\\":1}","__proto__":"p"}') as Record<
      string,
      string
    >;
    const created = await createKey('user-rules', { name: 'rules', scopes: [{ host_rules: rules }] });
    const returned = (created.scopes[0] as { host_rules: Record<string, string> }).host_rules;
    assert.deepEqual(Object.keys(returned), ['b.localhost', 'a.localhost', '__proto__']);
    assert.equal(Object.getOwnPropertyDescriptor(returned, '__proto__')?.value, 'p');
    const listed = (await listKeys('user-rules')).api_keys[0] as {
      scopes: Array<{ host_rules: Record<string, string> }>;
    };
    assert.deepEqual(Object.keys(listed.scopes[0]?.host_rules ?? {}), ['b.localhost', 'a.localhost', '__proto__']);
  });

  test('accepts names of 1 and 200 characters (code points, not UTF-16 units)', async () => {
    assert.equal((await createKey('user-names', { name: 'x' })).name, 'x');
    assert.equal((await createKey('user-names', { name: 'n'.repeat(200) })).name, 'n'.repeat(200));
    assert.equal((await createKey('user-names', { name: '😀'.repeat(200) })).name, '😀'.repeat(200));
  });

  test('parses a JSON body whatever the Content-Type', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
      const response = await service.app.inject({
        method: 'POST',
        url: '/v0/apikeys',
        headers: { ...asUser('user-ctype'), 'content-type': type },
        payload: JSON.stringify({ name: type }),
      });
      assert.equal(response.statusCode, 201, response.body);
      assert.equal((response.json() as CreatedKey).name, type);
    }
  });

  describe('rejects bad input and stores nothing', () => {
    const user = 'user-bad-input';
    const invalid: Array<[string, unknown]> = [
      ['missing name', {}],
      ['empty name', { name: '' }],
      ['201-character name', { name: 'n'.repeat(201) }],
      ['name not a string', { name: 42 }],
      ['unknown top-level field', { name: 'k', secret: 'mine' }],
      ['unknown field inside a scope', { name: 'k', scopes: [{ projects: [], paths: ['/x'] }] }],
      ['scopes not an array', { name: 'k', scopes: {} }],
      ['scope not an object', { name: 'k', scopes: ['project-1'] }],
      ['projects not an array', { name: 'k', scopes: [{ projects: 'project-1' }] }],
      ['empty project id', { name: 'k', scopes: [{ projects: [''] }] }],
      ['project id not a string', { name: 'k', scopes: [{ projects: [7] }] }],
      ['host_rules value a number', { name: 'k', scopes: [{ host_rules: { 'a.localhost': 1 } }] }],
      ['host_rules value null', { name: 'k', scopes: [{ host_rules: { 'a.localhost': null } }] }],
      ['host_rules value an object', { name: 'k', scopes: [{ host_rules: { 'a.localhost': {} } }] }],
      ['host_rules an array', { name: 'k', scopes: [{ host_rules: ['a.localhost'] }] }],
      ['body an array', [{ name: 'k' }]],
      ['body a string', 'k'],
    ];
    for (const [label, body] of invalid) {
      test(`${label} → 400 validation_error`, async () => {
        const response = await service.app.inject({
          method: 'POST',
          url: '/v0/apikeys',
          headers: { ...asUser(user), 'content-type': 'application/json' },
          payload: JSON.stringify(body),
        });
        assertError(response, 400, 'validation_error');
      });
    }

    test('the unknown field is named in the message', async () => {
      const response = await service.app.inject({
        method: 'POST',
        url: '/v0/apikeys',
        headers: asUser(user),
        payload: { name: 'k', scopes: [{ host_rules: {}, methods: ['GET'] }] },
      });
      assert.match(assertError(response, 400, 'validation_error'), /methods/);
    });

    test('empty body → 400 validation_error', async () => {
      const response = await service.app.inject({
        method: 'POST',
        url: '/v0/apikeys',
        headers: { ...asUser(user), 'content-type': 'application/json' },
      });
      assertError(response, 400, 'validation_error');
    });

    for (const text of ['{"name":', '{name: "k"}', "{'name':'k'}", 'not json']) {
      test(`malformed JSON ${JSON.stringify(text)} → 400 invalid_json`, async () => {
        const response = await service.app.inject({
          method: 'POST',
          url: '/v0/apikeys',
          headers: { ...asUser(user), 'content-type': 'application/json' },
          payload: text,
        });
        assertError(response, 400, 'invalid_json');
      });
    }

    test('after all of them the caller has no keys and no row was written', async () => {
      assert.deepEqual(await listKeys(user), { api_keys: [] });
      const rows = await service.store.sql.database.read(() =>
        all('select key from apikeys_keys where owner = ?', user),
      );
      assert.equal(rows.length, 0);
    });
  });
});

describe('GET /v0/apikeys', () => {
  test('a caller without keys gets {"api_keys":[]}', async () => {
    const response = await service.app.inject({ method: 'GET', url: '/v0/apikeys', headers: asUser('user-nobody') });
    assert.equal(response.statusCode, 200);
    assert.equal(response.headers['content-type'], 'application/json; charset=utf-8');
    assert.equal(response.body, '{"api_keys":[]}');
  });

  test("lists only the caller's keys, in creation order, without secrets or hashes", async () => {
    const names = ['first', 'second', 'third', 'fourth'];
    const created: CreatedKey[] = [];
    for (const name of names)
      created.push(
        await createKey('user-list', { name, scopes: name === 'second' ? [{ projects: ['project-x'] }] : [] }),
      );
    await createKey('user-list-other', { name: 'not mine' });

    const response = await service.app.inject({ method: 'GET', url: '/v0/apikeys', headers: asUser('user-list') });
    assert.equal(response.statusCode, 200);
    const listed = (response.json() as { api_keys: Array<Record<string, unknown>> }).api_keys;
    assert.deepEqual(
      listed,
      created.map((k) => ({ key: k.key, name: k.name, scopes: k.scopes })),
    );
    for (const entry of listed) assert.deepEqual(Object.keys(entry).sort(), ['key', 'name', 'scopes']);
    for (const k of created) assert.ok(!response.body.includes(k.secret), 'secret not listed');
    assert.ok(!response.body.includes('$2'), 'no bcrypt hash listed');
  });
});

describe('DELETE /v0/apikeys/{key}', () => {
  test('revokes the key: 200 {key}, gone from the list and the database, second delete 404', async () => {
    const keep = await createKey('user-revoke', { name: 'keep' });
    const gone = await createKey('user-revoke', { name: 'gone' });
    const response = await service.app.inject({
      method: 'DELETE',
      url: `/v0/apikeys/${gone.key}`,
      headers: asUser('user-revoke'),
    });
    assert.equal(response.statusCode, 200);
    assert.equal(response.headers['content-type'], 'application/json; charset=utf-8');
    assert.deepEqual(response.json(), { key: gone.key });
    assert.deepEqual(
      (await listKeys('user-revoke')).api_keys.map((k) => k.key),
      [keep.key],
    );
    assert.equal(await storedHash(gone.key), undefined);

    const again = await service.app.inject({
      method: 'DELETE',
      url: `/v0/apikeys/${gone.key}`,
      headers: asUser('user-revoke'),
    });
    assertError(again, 404, 'not_found');
  });

  test('publishes the revocation on apikeys.revoked', async () => {
    const created = await createKey('user-revoke-event', { name: 'evented' });
    const message = nextMessage(service.store, 'apikeys.revoked', (m) => (m as { key?: string }).key === created.key);
    const response = await service.app.inject({
      method: 'DELETE',
      url: `/v0/apikeys/${created.key}`,
      headers: asUser('user-revoke-event'),
    });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(await message, { key: created.key });
  });

  test("another user's key → 404 and the key keeps existing", async () => {
    const created = await createKey('user-owner', { name: 'owned' });
    const response = await service.app.inject({
      method: 'DELETE',
      url: `/v0/apikeys/${created.key}`,
      headers: asUser('user-intruder'),
    });
    assertError(response, 404, 'not_found');
    assert.deepEqual(
      (await listKeys('user-owner')).api_keys.map((k) => k.key),
      [created.key],
    );
    assert.ok(await storedHash(created.key));
  });

  test('unknown key → 404', async () => {
    for (const key of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      const response = await service.app.inject({
        method: 'DELETE',
        url: `/v0/apikeys/${key}`,
        headers: asUser('user-revoke'),
      });
      assertError(response, 404, 'not_found');
    }
  });

  test('GET on a key path is 405 (no get endpoint)', async () => {
    const response = await service.app.inject({
      method: 'GET',
      url: '/v0/apikeys/some-key',
      headers: asUser('user-revoke'),
    });
    assertError(response, 405, 'method_not_allowed');
    assert.equal(response.headers.allow, 'DELETE');
  });
});
