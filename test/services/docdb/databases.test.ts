import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { verify } from '@node-rs/bcrypt';
import { newId } from '../../../src/core/ids.ts';
import { all, first, run } from '../../../src/store/sql-work.ts';
import type { TestService } from '../../helpers/service.ts';
import {
  as,
  assertError,
  call,
  countRows,
  createApiKey,
  createDatabase,
  getDatabase,
  jsonOf,
  startDocdb,
  UUID_V4,
  withKey,
  type CreatedKey,
  type DatabaseBody,
} from './helpers.ts';

let service: TestService;

before(async () => {
  service = await startDocdb();
});

after(async () => {
  await service.close();
});

const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

type Summary = { id: string; name: string; creation_date: string; owners_length: number };

async function listDatabases(user: string): Promise<Summary[]> {
  return jsonOf<Summary[]>(await call(service, 'GET', '/v1/databases', as(user)));
}

async function storedHash(key: string): Promise<string | undefined> {
  const row = await service.store.sql.database.read(() =>
    first<{ secret_hash: string }>('select secret_hash from docdb_api_keys where key = ?', key),
  );
  return row?.secret_hash;
}

const dbUrl = (id: string, suffix = '') => `/v1/databases/${id}${suffix}`;

describe('GET /v1/databases', () => {
  test("lists the caller's databases in creation order as {id,name,creation_date,owners_length}", async () => {
    const first = await createDatabase(service, 'list-user', 'first');
    await createDatabase(service, 'someone-else', 'not mine');
    const second = await createDatabase(service, 'list-user', 'second');
    const listed = await listDatabases('list-user');
    assert.deepEqual(listed, [
      { id: first.id, name: 'first', creation_date: first.creation_date, owners_length: 1 },
      { id: second.id, name: 'second', creation_date: second.creation_date, owners_length: 1 },
    ]);
    assert.deepEqual(Object.keys(listed[0] ?? {}), ['id', 'name', 'creation_date', 'owners_length']);
  });

  test('answers [] for a caller without databases', async () => {
    assert.deepEqual(await listDatabases('nobody-at-all'), []);
  });

  test('includes databases the caller was added to, with their current owners_length', async () => {
    const other = await createDatabase(service, 'list-owner', 'shared');
    jsonOf(await call(service, 'POST', dbUrl(other.id, ':addOwner'), as('list-owner'), { owner_id: 'list-added' }));
    assert.deepEqual(await listDatabases('list-added'), [
      { id: other.id, name: 'shared', creation_date: other.creation_date, owners_length: 2 },
    ]);
    jsonOf(await call(service, 'POST', dbUrl(other.id, ':deleteOwner'), as('list-owner'), { owner_id: 'list-added' }));
    assert.deepEqual(await listDatabases('list-added'), []);
  });

  test('matches user ids exactly (no LIKE wildcards, no case folding, no match across neighbours)', async () => {
    const db = await createDatabase(service, 'wild_card%1', 'wild');
    jsonOf(await call(service, 'POST', dbUrl(db.id, ':addOwner'), as('wild_card%1'), { owner_id: 'p"q' }));
    assert.equal((await listDatabases('wild_card%1')).length, 1);
    assert.equal((await listDatabases('p"q')).length, 1);
    for (const user of ['wildXcard%1', 'wild_card%', 'WILD_CARD%1', 'wild', '%', '_', ',', '","', 'p', 'q']) {
      assert.deepEqual(await listDatabases(user), [], user);
    }
  });

  test('requires an identity: none, an unusable header or only a database key are 401', async () => {
    const db = await createDatabase(service, 'list-auth');
    const key = await createApiKey(service, db.id, as('list-auth'));
    assertError(await call(service, 'GET', '/v1/databases'), 401, 'unauthorized');
    assertError(
      await call(service, 'GET', '/v1/databases', { 'x-gateway-authentication': 'not json' }),
      401,
      'unauthorized',
    );
    assertError(
      await call(service, 'GET', '/v1/databases', { 'x-gateway-authentication': '{"user":{}}' }),
      401,
      'unauthorized',
    );
    assertError(await call(service, 'GET', '/v1/databases', withKey(key)), 401, 'unauthorized');
  });
});

describe('POST /v1/databases', () => {
  test('creates a database with the caller as sole owner: 201 and the full record', async () => {
    const response = await call(service, 'POST', '/v1/databases', as('creator'), { name: 'my db' });
    const record = jsonOf<DatabaseBody>(response, 201);
    assert.deepEqual(Object.keys(record), ['id', 'name', 'creation_date', 'owners', 'api_keys', 'owners_length']);
    assert.match(record.id, UUID_V4);
    assert.equal(record.name, 'my db');
    assert.match(record.creation_date, RFC3339_UTC);
    assert.ok(Math.abs(Date.parse(record.creation_date) - Date.now()) < 60_000);
    assert.deepEqual(record.owners, ['creator']);
    assert.deepEqual(record.api_keys, []);
    assert.equal(record.owners_length, 1);
    assert.deepEqual(await getDatabase(service, record.id, as('creator')), record);
  });

  test('names need not be unique: the id identifies a database', async () => {
    const a = await createDatabase(service, 'same-names', 'twin');
    const b = await createDatabase(service, 'same-names', 'twin');
    assert.notEqual(a.id, b.id);
    assert.deepEqual(
      (await listDatabases('same-names')).map((d) => d.id),
      [a.id, b.id],
    );
  });

  test('accepts names of 1 and 200 characters (code points) and ignores unknown fields', async () => {
    assert.equal((await createDatabase(service, 'names', 'x')).name, 'x');
    assert.equal((await createDatabase(service, 'names', 'n'.repeat(200))).name, 'n'.repeat(200));
    assert.equal((await createDatabase(service, 'names', '😀'.repeat(200))).name, '😀'.repeat(200));
    const extra = jsonOf<DatabaseBody>(
      await call(service, 'POST', '/v1/databases', as('names'), { name: 'extra', mode: 'x', owners: ['intruder'] }),
      201,
    );
    assert.deepEqual(extra.owners, ['names']);
  });

  test('rejects bad names with 400 validation_error and creates nothing', async () => {
    const before = await countRows(service, 'docdb_databases');
    for (const body of [
      {},
      { name: '' },
      { name: 'n'.repeat(201) },
      { name: 5 },
      { name: null },
      { name: ['a'] },
      { name: 'nul\u0000byte' },
      null,
      [],
      'text',
      7,
    ]) {
      assertError(
        await call(
          service,
          'POST',
          '/v1/databases',
          { ...as('bad-names'), 'content-type': 'application/json' },
          JSON.stringify(body),
        ),
        400,
        'validation_error',
      );
    }
    assert.equal(await countRows(service, 'docdb_databases'), before);
  });

  test('an empty or malformed body is 400 invalid_json', async () => {
    for (const payload of [undefined, '', '   \n', '{', '{"name":', "{'name':'x'}", 'nope']) {
      const headers = { ...as('bad-json'), 'content-type': 'application/json' };
      assertError(await call(service, 'POST', '/v1/databases', headers, payload), 400, 'invalid_json');
    }
    assertError(await call(service, 'POST', '/v1/databases', as('bad-json')), 400, 'invalid_json');
    assert.deepEqual(await listDatabases('bad-json'), []);
  });

  test('parses the JSON body whatever the Content-Type', async () => {
    for (const type of [
      'application/json',
      'application/jsonl',
      'application/x-ndjson',
      'text/plain',
      'application/x-www-form-urlencoded',
    ]) {
      const response = await call(
        service,
        'POST',
        '/v1/databases',
        { ...as('ctype'), 'content-type': type },
        JSON.stringify({ name: type }),
      );
      assert.equal(jsonOf<DatabaseBody>(response, 201).name, type);
    }
    assert.equal((await listDatabases('ctype')).length, 5);
  });

  test('requires an identity (a database key is not enough)', async () => {
    const db = await createDatabase(service, 'create-auth');
    const key = await createApiKey(service, db.id, as('create-auth'));
    assertError(await call(service, 'POST', '/v1/databases', {}, { name: 'x' }), 401, 'unauthorized');
    assertError(
      await call(service, 'POST', '/v1/databases', { 'x-gateway-authentication': '{"user":{"id":1}}' }, { name: 'x' }),
      401,
      'unauthorized',
    );
    assertError(await call(service, 'POST', '/v1/databases', withKey(key), { name: 'x' }), 401, 'unauthorized');
  });
});

describe('GET /v1/databases/{id}', () => {
  test('returns the full record with api_keys in creation order and owners_length', async () => {
    const db = await createDatabase(service, 'get-owner', 'get me');
    const keys: CreatedKey[] = [];
    for (const name of ['one', 'two', 'three']) keys.push(await createApiKey(service, db.id, as('get-owner'), name));
    jsonOf(await call(service, 'POST', dbUrl(db.id, ':addOwner'), as('get-owner'), { owner_id: 'get-second' }));
    const record = await getDatabase(service, db.id, as('get-owner'));
    assert.deepEqual(record, {
      id: db.id,
      name: 'get me',
      creation_date: db.creation_date,
      owners: ['get-owner', 'get-second'],
      api_keys: keys.map((k) => k.key),
      owners_length: 2,
    });
    assert.ok(!keys.some((k) => JSON.stringify(record).includes(k.secret)), 'no secret in the record');
  });

  test('answers a key of the database and a second owner alike', async () => {
    const db = await createDatabase(service, 'get-any');
    const key = await createApiKey(service, db.id, as('get-any'));
    jsonOf(await call(service, 'POST', dbUrl(db.id, ':addOwner'), as('get-any'), { owner_id: 'get-any-2' }));
    const expected = await getDatabase(service, db.id, as('get-any'));
    assert.deepEqual(await getDatabase(service, db.id, withKey(key)), expected);
    assert.deepEqual(await getDatabase(service, db.id, as('get-any-2')), expected);
  });

  test('an unknown or malformed id is 404', async () => {
    for (const id of [newId(), 'not-a-uuid', encodeURIComponent('a b'), '%00', 'x'.repeat(500)]) {
      assertError(await call(service, 'GET', dbUrl(id), as('get-404')), 404, 'not_found');
    }
  });

  test('an encoded colon does not split: GET {id}%3AaddOwner reads the database named so (404)', async () => {
    const db = await createDatabase(service, 'get-colon');
    assertError(await call(service, 'GET', dbUrl(db.id, '%3AaddOwner'), as('get-colon')), 404, 'not_found');
    assertError(await call(service, 'GET', dbUrl(db.id, '%3aaddOwner'), as('get-colon')), 404, 'not_found');
    assertError(await call(service, 'GET', dbUrl(db.id, ':unknownVerb'), as('get-colon')), 404, 'not_found');
  });

  test('ignores a query string', async () => {
    const db = await createDatabase(service, 'get-query');
    assert.equal((await getDatabase(service, `${db.id}?x=1:addOwner`, as('get-query'))).id, db.id);
  });
});

describe('PATCH /v1/databases/{id}', () => {
  test('renames the database and returns the full record', async () => {
    const db = await createDatabase(service, 'patch-owner', 'old');
    const key = await createApiKey(service, db.id, as('patch-owner'));
    const renamed = jsonOf<DatabaseBody>(
      await call(service, 'PATCH', dbUrl(db.id), as('patch-owner'), { name: 'new', other: 1 }),
    );
    assert.deepEqual(renamed, { ...db, name: 'new', api_keys: [key.key] });
    assert.equal((await getDatabase(service, db.id, as('patch-owner'))).name, 'new');
    const byKey = jsonOf<DatabaseBody>(await call(service, 'PATCH', dbUrl(db.id), withKey(key), { name: 'by key' }));
    assert.equal(byKey.name, 'by key');
    assert.deepEqual(
      (await listDatabases('patch-owner')).map((d) => d.name),
      ['by key'],
    );
  });

  test('rejects a bad body with 400 and changes nothing', async () => {
    const db = await createDatabase(service, 'patch-bad', 'keep');
    const headers = { ...as('patch-bad'), 'content-type': 'application/json' };
    for (const payload of [undefined, '', '{', 'nul'])
      assertError(await call(service, 'PATCH', dbUrl(db.id), headers, payload), 400, 'invalid_json');
    for (const body of [
      {},
      { name: '' },
      { name: 'n'.repeat(201) },
      { name: 1 },
      { name: true },
      null,
      ['x'],
      { name: 'a\u0000' },
    ]) {
      assertError(await call(service, 'PATCH', dbUrl(db.id), headers, JSON.stringify(body)), 400, 'validation_error');
    }
    assert.equal((await getDatabase(service, db.id, as('patch-bad'))).name, 'keep');
  });

  test('unknown database 404, non-owner 403, no credentials 401', async () => {
    const db = await createDatabase(service, 'patch-access', 'keep');
    assertError(await call(service, 'PATCH', dbUrl(newId()), as('patch-access'), { name: 'x' }), 404, 'not_found');
    assertError(await call(service, 'PATCH', dbUrl(db.id), as('intruder'), { name: 'x' }), 403, 'forbidden');
    assertError(await call(service, 'PATCH', dbUrl(db.id), {}, { name: 'x' }), 401, 'unauthorized');
    assert.equal((await getDatabase(service, db.id, as('patch-access'))).name, 'keep');
  });
});

describe('DELETE /v1/databases/{id}', () => {
  test('answers {id,name,creation_date}; afterwards the database is 404 and its keys are unknown (401)', async () => {
    const db = await createDatabase(service, 'del-owner', 'doomed');
    const other = await createDatabase(service, 'del-owner', 'survivor');
    const key = await createApiKey(service, db.id, as('del-owner'));
    // The key works (and is cached as a key of `db`) before the delete.
    await getDatabase(service, db.id, withKey(key));
    assertError(await call(service, 'GET', dbUrl(other.id), withKey(key)), 403, 'forbidden');

    const deleted = jsonOf<Record<string, unknown>>(await call(service, 'DELETE', dbUrl(db.id), as('del-owner')));
    assert.deepEqual(deleted, { id: db.id, name: 'doomed', creation_date: db.creation_date });
    assert.deepEqual(Object.keys(deleted), ['id', 'name', 'creation_date']);

    assertError(await call(service, 'GET', dbUrl(db.id), as('del-owner')), 404, 'not_found');
    assertError(await call(service, 'GET', dbUrl(db.id), withKey(key)), 404, 'not_found');
    assertError(await call(service, 'GET', dbUrl(other.id), withKey(key)), 401, 'unauthorized');
    assertError(await call(service, 'GET', `${dbUrl(db.id)}/collections`, as('del-owner')), 404, 'not_found');
    assertError(await call(service, 'DELETE', dbUrl(db.id), as('del-owner')), 404, 'not_found');
    assert.deepEqual(
      (await listDatabases('del-owner')).map((d) => d.id),
      [other.id],
    );
  });

  test('deletes its keys, collections, documents and indexes with it', async () => {
    const db = await createDatabase(service, 'del-cascade');
    const keep = await createDatabase(service, 'del-cascade');
    await createApiKey(service, db.id, as('del-cascade'));
    await createApiKey(service, keep.id, as('del-cascade'));
    for (const id of [db.id, keep.id]) {
      await service.store.sql.database.write(function* () {
        yield* run('insert into docdb_collections (database_id, name) values (?, ?)', id, 'c');
        const collection = yield* first<{ id: number }>('select id from docdb_collections where database_id = ?', id);
        const collectionId = Number(collection?.id);
        yield* run('insert into docdb_documents (collection_id, body) values (?, ?)', collectionId, '{"a":1}');
        yield* run(
          'insert into docdb_indexes (collection_id, name, definition) values (?, ?, ?)',
          collectionId,
          'i',
          '{}',
        );
      });
    }
    const count = async (id: string) => ({
      keys: await countRows(service, 'docdb_api_keys', { column: 'database_id', value: id }),
      collections: await countRows(service, 'docdb_collections', { column: 'database_id', value: id }),
    });
    assert.deepEqual(await count(db.id), { keys: 1, collections: 1 });
    const documentsBefore = await countRows(service, 'docdb_documents');
    const indexesBefore = await countRows(service, 'docdb_indexes');

    jsonOf(await call(service, 'DELETE', dbUrl(db.id), as('del-cascade')));
    assert.deepEqual(await count(db.id), { keys: 0, collections: 0 });
    assert.deepEqual(await count(keep.id), { keys: 1, collections: 1 });
    assert.equal(await countRows(service, 'docdb_documents'), documentsBefore - 1);
    assert.equal(await countRows(service, 'docdb_indexes'), indexesBefore - 1);
  });

  test('a key of the database may delete it; a non-owner may not', async () => {
    const db = await createDatabase(service, 'del-key');
    const key = await createApiKey(service, db.id, as('del-key'));
    assertError(await call(service, 'DELETE', dbUrl(db.id), as('del-intruder')), 403, 'forbidden');
    assertError(await call(service, 'DELETE', dbUrl(db.id)), 401, 'unauthorized');
    await getDatabase(service, db.id, as('del-key'));
    jsonOf(await call(service, 'DELETE', dbUrl(db.id), withKey(key)));
    assertError(await call(service, 'GET', dbUrl(db.id), as('del-key')), 404, 'not_found');
  });
});

describe('POST /v1/databases/{id}:createApiKey', () => {
  test('answers 201 {name,key,secret,creation_date} and appends the key to api_keys', async () => {
    const db = await createDatabase(service, 'key-owner');
    const response = await call(service, 'POST', dbUrl(db.id, ':createApiKey'), as('key-owner'), {
      name: 'ci',
      extra: true,
    });
    const created = jsonOf<CreatedKey>(response, 201);
    assert.deepEqual(Object.keys(created), ['name', 'key', 'secret', 'creation_date']);
    assert.equal(created.name, 'ci');
    assert.match(created.key, UUID_V4);
    assert.match(created.secret, UUID_V4);
    assert.notEqual(created.key, created.secret);
    assert.match(created.creation_date, RFC3339_UTC);
    const second = await createApiKey(service, db.id, as('key-owner'), 'second');
    assert.deepEqual((await getDatabase(service, db.id, as('key-owner'))).api_keys, [created.key, second.key]);
    // Both work.
    await getDatabase(service, db.id, withKey(created));
    await getDatabase(service, db.id, withKey(second));
  });

  test('stores the secret only as a bcrypt hash of cost 10; it is never shown again', async () => {
    const db = await createDatabase(service, 'key-hash');
    const created = await createApiKey(service, db.id, as('key-hash'));
    const hash = await storedHash(created.key);
    assert.ok(hash);
    assert.match(hash, /^\$2[aby]\$10\$/);
    assert.equal(await verify(created.secret, hash), true);
    const rows = await service.store.sql.database.read(() =>
      all('select * from docdb_api_keys where key = ?', created.key),
    );
    assert.ok(!JSON.stringify(rows).includes(created.secret), 'the secret appears in no column');
    for (const response of [
      await call(service, 'GET', dbUrl(db.id), as('key-hash')),
      await call(service, 'GET', '/v1/databases', as('key-hash')),
      await call(service, 'GET', '/v1/debug/dbs', as('key-hash')),
      await call(service, 'GET', dbUrl(db.id), withKey({ key: created.key, secret: 'wrong' })),
    ]) {
      assert.ok(!response.body.includes(created.secret), response.body);
    }
  });

  test('a key may create another key', async () => {
    const db = await createDatabase(service, 'key-by-key');
    const first = await createApiKey(service, db.id, as('key-by-key'));
    const second = await createApiKey(service, db.id, withKey(first), 'made by a key');
    await getDatabase(service, db.id, withKey(second));
  });

  test('name: required, 1–200 characters; a bad body is 400 and creates nothing', async () => {
    const db = await createDatabase(service, 'key-names');
    const url = dbUrl(db.id, ':createApiKey');
    const headers = { ...as('key-names'), 'content-type': 'application/json' };
    assert.equal((await createApiKey(service, db.id, as('key-names'), 'k'.repeat(200))).name, 'k'.repeat(200));
    assert.equal((await createApiKey(service, db.id, as('key-names'), '🔑'.repeat(200))).name, '🔑'.repeat(200));
    for (const body of [
      {},
      { name: '' },
      { name: 'k'.repeat(201) },
      { name: 3 },
      { name: null },
      null,
      [],
      '"ci"',
      { name: 'a\u0000b' },
    ]) {
      assertError(
        await call(service, 'POST', url, headers, typeof body === 'string' ? body : JSON.stringify(body)),
        400,
        'validation_error',
      );
    }
    for (const payload of [undefined, '', ' ', '{"name":"x"', 'name=x'])
      assertError(await call(service, 'POST', url, headers, payload), 400, 'invalid_json');
    assertError(await call(service, 'POST', url, as('key-names')), 400, 'invalid_json');
    assert.equal((await getDatabase(service, db.id, as('key-names'))).api_keys.length, 2);
  });

  test('non-owner 403, unknown database 404, no credentials 401 — and nothing is created', async () => {
    const db = await createDatabase(service, 'key-access');
    assertError(
      await call(service, 'POST', dbUrl(db.id, ':createApiKey'), as('key-intruder'), { name: 'x' }),
      403,
      'forbidden',
    );
    assertError(await call(service, 'POST', dbUrl(db.id, ':createApiKey'), {}, { name: 'x' }), 401, 'unauthorized');
    assertError(
      await call(service, 'POST', dbUrl(newId(), ':createApiKey'), as('key-access'), { name: 'x' }),
      404,
      'not_found',
    );
    assert.deepEqual((await getDatabase(service, db.id, as('key-access'))).api_keys, []);
  });
});

describe('POST /v1/databases/{id}:deleteApiKey', () => {
  test('answers 204 with an empty body; the key is gone from api_keys and stops working at once', async () => {
    const db = await createDatabase(service, 'delkey-owner');
    const doomed = await createApiKey(service, db.id, as('delkey-owner'), 'doomed');
    const kept = await createApiKey(service, db.id, as('delkey-owner'), 'kept');
    await getDatabase(service, db.id, withKey(doomed));
    const response = await call(service, 'POST', dbUrl(db.id, ':deleteApiKey'), as('delkey-owner'), {
      key: doomed.key,
      ignored: 1,
    });
    assert.equal(response.statusCode, 204);
    assert.equal(response.body, '');
    assertError(await call(service, 'GET', dbUrl(db.id), withKey(doomed)), 401, 'unauthorized');
    assert.deepEqual((await getDatabase(service, db.id, withKey(kept))).api_keys, [kept.key]);
    assert.equal(await storedHash(doomed.key), undefined);
    assertError(
      await call(service, 'POST', dbUrl(db.id, ':deleteApiKey'), as('delkey-owner'), { key: doomed.key }),
      404,
      'not_found',
    );
  });

  test('a key may delete itself', async () => {
    const db = await createDatabase(service, 'delkey-self');
    const key = await createApiKey(service, db.id, as('delkey-self'));
    assert.equal(
      (await call(service, 'POST', dbUrl(db.id, ':deleteApiKey'), withKey(key), { key: key.key })).statusCode,
      204,
    );
    assertError(await call(service, 'GET', dbUrl(db.id), withKey(key)), 401, 'unauthorized');
  });

  test('a key this database does not have is 404 (another database keeps its key)', async () => {
    const db = await createDatabase(service, 'delkey-404');
    const other = await createDatabase(service, 'delkey-404');
    const foreign = await createApiKey(service, other.id, as('delkey-404'));
    for (const key of [foreign.key, newId(), 'not-a-key', 'x\u0000y']) {
      const message = assertError(
        await call(service, 'POST', dbUrl(db.id, ':deleteApiKey'), as('delkey-404'), { key }),
        404,
        'not_found',
      );
      assert.ok(!message.includes(key), 'the submitted value is not echoed');
    }
    await getDatabase(service, other.id, withKey(foreign));
  });

  test('a bad body is 400', async () => {
    const db = await createDatabase(service, 'delkey-bad');
    const key = await createApiKey(service, db.id, as('delkey-bad'));
    const url = dbUrl(db.id, ':deleteApiKey');
    const headers = { ...as('delkey-bad'), 'content-type': 'application/json' };
    for (const body of [{}, { key: '' }, { key: 5 }, { key: [key.key] }, { name: key.key }, null]) {
      assertError(await call(service, 'POST', url, headers, JSON.stringify(body)), 400, 'validation_error');
    }
    for (const payload of [undefined, '', '{"key"}'])
      assertError(await call(service, 'POST', url, headers, payload), 400, 'invalid_json');
    await getDatabase(service, db.id, withKey(key));
  });

  test('non-owner 403 and no credentials 401 leave the key working', async () => {
    const db = await createDatabase(service, 'delkey-access');
    const key = await createApiKey(service, db.id, as('delkey-access'));
    assertError(
      await call(service, 'POST', dbUrl(db.id, ':deleteApiKey'), as('delkey-intruder'), { key: key.key }),
      403,
      'forbidden',
    );
    assertError(await call(service, 'POST', dbUrl(db.id, ':deleteApiKey'), {}, { key: key.key }), 401, 'unauthorized');
    await getDatabase(service, db.id, withKey(key));
  });
});

describe('POST /v1/databases/{id}:addOwner', () => {
  test('appends a new owner and answers 200 with the owners array', async () => {
    const db = await createDatabase(service, 'add-owner');
    const owners = jsonOf<string[]>(
      await call(service, 'POST', dbUrl(db.id, ':addOwner'), as('add-owner'), { owner_id: 'add-b' }),
    );
    assert.deepEqual(owners, ['add-owner', 'add-b']);
    assert.deepEqual(
      jsonOf<string[]>(
        await call(service, 'POST', dbUrl(db.id, ':addOwner'), as('add-b'), { owner_id: 'add-c', x: 1 }),
      ),
      ['add-owner', 'add-b', 'add-c'],
    );
    const record = await getDatabase(service, db.id, as('add-c'));
    assert.deepEqual(record.owners, ['add-owner', 'add-b', 'add-c']);
    assert.equal(record.owners_length, 3);
  });

  test('adding an existing owner changes nothing: 200 with the unchanged array', async () => {
    const db = await createDatabase(service, 'add-dup');
    jsonOf(await call(service, 'POST', dbUrl(db.id, ':addOwner'), as('add-dup'), { owner_id: 'add-dup-2' }));
    for (const owner of ['add-dup', 'add-dup-2']) {
      assert.deepEqual(
        jsonOf<string[]>(await call(service, 'POST', dbUrl(db.id, ':addOwner'), as('add-dup'), { owner_id: owner })),
        ['add-dup', 'add-dup-2'],
      );
    }
  });

  test('a key of the database may add an owner', async () => {
    const db = await createDatabase(service, 'add-by-key');
    const key = await createApiKey(service, db.id, as('add-by-key'));
    assert.deepEqual(
      jsonOf<string[]>(
        await call(service, 'POST', dbUrl(db.id, ':addOwner'), withKey(key), { owner_id: 'added-by-key' }),
      ),
      ['add-by-key', 'added-by-key'],
    );
  });

  test('a bad body is 400 and changes nothing', async () => {
    const db = await createDatabase(service, 'add-bad');
    const url = dbUrl(db.id, ':addOwner');
    const headers = { ...as('add-bad'), 'content-type': 'application/json' };
    for (const body of [
      {},
      { owner_id: '' },
      { owner_id: 7 },
      { owner_id: null },
      { owner_id: ['x'] },
      { owner: 'x' },
      { owner_id: 'u'.repeat(257) },
      { owner_id: 'a\u0000' },
      'x',
    ]) {
      assertError(await call(service, 'POST', url, headers, JSON.stringify(body)), 400, 'validation_error');
    }
    for (const payload of [undefined, '', '{owner_id:1}'])
      assertError(await call(service, 'POST', url, headers, payload), 400, 'invalid_json');
    assert.deepEqual((await getDatabase(service, db.id, as('add-bad'))).owners, ['add-bad']);
  });

  test('non-owner 403, unknown database 404, no credentials 401', async () => {
    const db = await createDatabase(service, 'add-access');
    assertError(
      await call(service, 'POST', dbUrl(db.id, ':addOwner'), as('add-intruder'), { owner_id: 'add-intruder' }),
      403,
      'forbidden',
    );
    assertError(await call(service, 'POST', dbUrl(db.id, ':addOwner'), {}, { owner_id: 'x' }), 401, 'unauthorized');
    assertError(
      await call(service, 'POST', dbUrl(newId(), ':addOwner'), as('add-access'), { owner_id: 'x' }),
      404,
      'not_found',
    );
    assert.deepEqual((await getDatabase(service, db.id, as('add-access'))).owners, ['add-access']);
  });

  test('concurrent addOwner calls all land', async () => {
    const db = await createDatabase(service, 'add-race');
    const added = Array.from({ length: 20 }, (_, i) => `racer-${i}`);
    const responses = await Promise.all(
      added.map((owner) => call(service, 'POST', dbUrl(db.id, ':addOwner'), as('add-race'), { owner_id: owner })),
    );
    for (const response of responses) assert.equal(response.statusCode, 200, response.body);
    const owners = (await getDatabase(service, db.id, as('add-race'))).owners;
    assert.equal(owners[0], 'add-race');
    assert.deepEqual([...owners.slice(1)].sort(), [...added].sort());
    assert.equal(owners.length, 21);
  });
});

describe('POST /v1/databases/{id}:deleteOwner', () => {
  test('removes an owner and answers 200 with the owners array; the removed user loses access', async () => {
    const db = await createDatabase(service, 'rm-owner');
    for (const owner of ['rm-b', 'rm-c'])
      jsonOf(await call(service, 'POST', dbUrl(db.id, ':addOwner'), as('rm-owner'), { owner_id: owner }));
    assert.deepEqual(
      jsonOf<string[]>(
        await call(service, 'POST', dbUrl(db.id, ':deleteOwner'), as('rm-owner'), { owner_id: 'rm-b', x: 1 }),
      ),
      ['rm-owner', 'rm-c'],
    );
    assertError(await call(service, 'GET', dbUrl(db.id), as('rm-b')), 403, 'forbidden');
    assert.deepEqual(await listDatabases('rm-b'), []);
    assert.equal((await getDatabase(service, db.id, as('rm-c'))).owners_length, 2);
  });

  test('removing yourself is 400 validation_error and changes nothing', async () => {
    const db = await createDatabase(service, 'rm-self');
    jsonOf(await call(service, 'POST', dbUrl(db.id, ':addOwner'), as('rm-self'), { owner_id: 'rm-self-2' }));
    const message = assertError(
      await call(service, 'POST', dbUrl(db.id, ':deleteOwner'), as('rm-self'), { owner_id: 'rm-self' }),
      400,
      'validation_error',
    );
    assert.equal(message, 'owners cannot remove themselves');
    assert.deepEqual((await getDatabase(service, db.id, as('rm-self'))).owners, ['rm-self', 'rm-self-2']);
  });

  test('a user who is not an owner is 404', async () => {
    const db = await createDatabase(service, 'rm-404');
    assertError(
      await call(service, 'POST', dbUrl(db.id, ':deleteOwner'), as('rm-404'), { owner_id: 'never-owner' }),
      404,
      'not_found',
    );
  });

  test('a key may remove owners but never the last one', async () => {
    const db = await createDatabase(service, 'rm-key');
    const key = await createApiKey(service, db.id, as('rm-key'));
    jsonOf(await call(service, 'POST', dbUrl(db.id, ':addOwner'), withKey(key), { owner_id: 'rm-key-2' }));
    assert.deepEqual(
      jsonOf<string[]>(await call(service, 'POST', dbUrl(db.id, ':deleteOwner'), withKey(key), { owner_id: 'rm-key' })),
      ['rm-key-2'],
    );
    assertError(
      await call(service, 'POST', dbUrl(db.id, ':deleteOwner'), withKey(key), { owner_id: 'rm-key-2' }),
      400,
      'validation_error',
    );
    assert.deepEqual((await getDatabase(service, db.id, withKey(key))).owners, ['rm-key-2']);
  });

  test('a bad body is 400; non-owner 403; unknown database 404; no credentials 401', async () => {
    const db = await createDatabase(service, 'rm-bad');
    jsonOf(await call(service, 'POST', dbUrl(db.id, ':addOwner'), as('rm-bad'), { owner_id: 'rm-bad-2' }));
    const url = dbUrl(db.id, ':deleteOwner');
    const headers = { ...as('rm-bad'), 'content-type': 'application/json' };
    for (const body of [{}, { owner_id: '' }, { owner_id: 1 }, { owner_id: null }, []]) {
      assertError(await call(service, 'POST', url, headers, JSON.stringify(body)), 400, 'validation_error');
    }
    assertError(await call(service, 'POST', url, headers, ''), 400, 'invalid_json');
    assertError(await call(service, 'POST', url, as('rm-intruder'), { owner_id: 'rm-bad-2' }), 403, 'forbidden');
    assertError(await call(service, 'POST', url, {}, { owner_id: 'rm-bad-2' }), 401, 'unauthorized');
    assertError(
      await call(service, 'POST', dbUrl(newId(), ':deleteOwner'), as('rm-bad'), { owner_id: 'rm-bad-2' }),
      404,
      'not_found',
    );
    assert.deepEqual((await getDatabase(service, db.id, as('rm-bad'))).owners, ['rm-bad', 'rm-bad-2']);
  });

  test('concurrent owner changes all land', async () => {
    const db = await createDatabase(service, 'rm-race');
    const initial = Array.from({ length: 10 }, (_, i) => `old-${i}`);
    for (const owner of initial)
      jsonOf(await call(service, 'POST', dbUrl(db.id, ':addOwner'), as('rm-race'), { owner_id: owner }));
    const added = Array.from({ length: 10 }, (_, i) => `new-${i}`);
    const responses = await Promise.all([
      ...initial.map((owner) =>
        call(service, 'POST', dbUrl(db.id, ':deleteOwner'), as('rm-race'), { owner_id: owner }),
      ),
      ...added.map((owner) => call(service, 'POST', dbUrl(db.id, ':addOwner'), as('rm-race'), { owner_id: owner })),
    ]);
    for (const response of responses) assert.equal(response.statusCode, 200, response.body);
    const owners = (await getDatabase(service, db.id, as('rm-race'))).owners;
    assert.deepEqual(owners.slice().sort(), ['rm-race', ...added].sort());
  });
});

describe('action routing (docdb.md §1.1)', () => {
  test('POST on a database without an action is 405 with Allow: GET, PATCH, DELETE', async () => {
    const db = await createDatabase(service, 'route-post');
    for (const suffix of ['', ':unknownVerb', ':ADDOWNER', ':', '%3AaddOwner', '%3acreateApiKey']) {
      const response = await call(service, 'POST', dbUrl(db.id, suffix), as('route-post'), {
        owner_id: 'x',
        name: 'x',
        key: 'x',
      });
      assertError(response, 405, 'method_not_allowed');
      assert.equal(response.headers.allow, 'GET, PATCH, DELETE', suffix);
    }
    assert.deepEqual(await getDatabase(service, db.id, as('route-post')), db);
  });

  test('GET, PATCH and DELETE of an action are 405 with Allow: POST and change nothing', async () => {
    const db = await createDatabase(service, 'route-action');
    for (const method of ['GET', 'PATCH', 'DELETE', 'HEAD']) {
      for (const action of ['createApiKey', 'deleteApiKey', 'addOwner', 'deleteOwner']) {
        const response = await call(
          service,
          method,
          dbUrl(db.id, `:${action}`),
          as('route-action'),
          method === 'PATCH' ? { name: 'x' } : undefined,
        );
        assert.equal(response.statusCode, 405, `${method} ${action}`);
        assert.equal(response.headers.allow, 'POST');
        if (method !== 'HEAD') assertError(response, 405, 'method_not_allowed');
      }
    }
    assert.deepEqual(await getDatabase(service, db.id, as('route-action')), db);
  });

  test('the 405 comes before credentials and body checks', async () => {
    const db = await createDatabase(service, 'route-order');
    assert.equal((await call(service, 'GET', dbUrl(db.id, ':addOwner'))).statusCode, 405);
    assert.equal((await call(service, 'POST', dbUrl(db.id), {}, '{broken')).statusCode, 405);
    assert.equal((await call(service, 'POST', dbUrl(newId(), ':nope'))).statusCode, 405);
  });

  test('the split is at the last colon: {id}:x:addOwner names database "{id}:x" (404)', async () => {
    const db = await createDatabase(service, 'route-colons');
    assertError(
      await call(service, 'POST', dbUrl(db.id, ':x:addOwner'), as('route-colons'), { owner_id: 'x' }),
      404,
      'not_found',
    );
    assert.deepEqual((await getDatabase(service, db.id, as('route-colons'))).owners, ['route-colons']);
  });

  test('an action with a query string still runs', async () => {
    const db = await createDatabase(service, 'route-query');
    assert.deepEqual(
      jsonOf<string[]>(
        await call(service, 'POST', `${dbUrl(db.id, ':addOwner')}?a=b:c`, as('route-query'), { owner_id: 'q' }),
      ),
      ['route-query', 'q'],
    );
  });

  test('other methods are 405 on the database path too', async () => {
    const db = await createDatabase(service, 'route-put');
    const response = await call(service, 'PUT', dbUrl(db.id), as('route-put'), { name: 'x' });
    assertError(response, 405, 'method_not_allowed');
    assert.match(String(response.headers.allow), /GET/);
  });
});
