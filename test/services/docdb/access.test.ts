import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import pino from 'pino';
import type { ServiceApp } from '../../../src/core/app.ts';
import { newId } from '../../../src/core/ids.ts';
import { VERSION } from '../../../src/core/version.ts';
import { DocdbAccess, DOCDB_KEYS_REVOKED_TOPIC } from '../../../src/services/docdb/access.ts';
import { DatabaseRepository } from '../../../src/services/docdb/repository/index.ts';
import { docdbService } from '../../../src/services/docdb/index.ts';
import { openStore, type Store } from '../../../src/store/index.ts';
import type { Notifier } from '../../../src/store/notifier/types.ts';
import { testDialect } from '../../helpers/database.ts';
import type { TestService } from '../../helpers/service.ts';
import {
  as,
  assertError,
  call,
  createApiKey,
  createDatabase,
  getDatabase,
  nextMessage,
  startDocdb,
  withKey,
  type CreatedKey,
  type DatabaseBody,
  type Payload,
} from './helpers.ts';

let service: TestService;

before(async () => {
  service = await startDocdb();
});

after(async () => {
  await service.close();
});

/** What `authorize` reads from a request: only its headers. */
function requestWith(headers: Record<string, string>): FastifyRequest {
  return { headers } as unknown as FastifyRequest;
}

const dbUrl = (id: string, suffix = '') => `/v1/databases/${id}${suffix}`;

describe('decision procedure (docdb.md §2)', () => {
  let db: DatabaseBody;
  let other: DatabaseBody;
  let key: CreatedKey;
  let foreign: CreatedKey;

  before(async () => {
    db = await createDatabase(service, 'owner', 'guarded');
    other = await createDatabase(service, 'other-owner', 'other');
    key = await createApiKey(service, db.id, as('owner'), 'own key');
    foreign = await createApiKey(service, other.id, as('other-owner'), 'foreign key');
  });

  const unusableIdentities = [
    'not json',
    '{"user":{}}',
    '{"user":{"id":5}}',
    '{"user":{"id":""}}',
    '{"user":"owner"}',
    '[]',
    'null',
    '"owner"',
    '',
  ];
  const identity = (value: string) => ({ 'x-gateway-authentication': value });
  const wrongSecret = () => ({ 'api-key': key.key, 'api-secret': newId() });

  test('1. no identity header and no Api-Key → 401, even for an unknown database', async () => {
    for (const id of [() => db.id, () => newId(), () => 'not-a-uuid']) {
      assertError(await call(service, 'GET', dbUrl(id())), 401, 'unauthorized');
      assertError(await call(service, 'GET', dbUrl(id()), { 'api-secret': key.secret }), 401, 'unauthorized');
    }
  });

  test('2. an unusable identity header → 401, before the database lookup and whatever key comes with it', async () => {
    for (const value of unusableIdentities) {
      assertError(await call(service, 'GET', dbUrl(db.id), identity(value)), 401, 'unauthorized');
      assertError(await call(service, 'GET', dbUrl(newId()), identity(value)), 401, 'unauthorized');
      assertError(
        await call(service, 'GET', dbUrl(db.id), { ...identity(value), ...withKey(key) }),
        401,
        'unauthorized',
      );
    }
  });

  test('3. an unknown database → 404 for any usable credentials, good or bad', async () => {
    for (const headers of [
      as('owner'),
      as('stranger'),
      withKey(key),
      withKey(foreign),
      wrongSecret(),
      { 'api-key': newId() },
      { ...as('stranger'), 'api-key': 'junk' },
    ]) {
      assertError(await call(service, 'GET', dbUrl(newId()), headers), 404, 'not_found');
      assertError(await call(service, 'GET', dbUrl('not-a-uuid'), headers), 404, 'not_found');
    }
  });

  test('4. an owner is allowed whatever key headers come along', async () => {
    for (const extra of [
      {},
      withKey(key),
      withKey(foreign),
      wrongSecret(),
      { 'api-key': 'junk' },
      { 'api-key': key.key },
    ]) {
      assert.equal((await getDatabase(service, db.id, { ...as('owner'), ...extra })).id, db.id);
    }
  });

  test('5. a key of this database is allowed, with or without a non-owner identity', async () => {
    assert.equal((await getDatabase(service, db.id, withKey(key))).id, db.id);
    assert.equal((await getDatabase(service, db.id, { ...as('stranger'), ...withKey(key) })).id, db.id);
    assert.equal((await getDatabase(service, db.id, { ...as('other-owner'), ...withKey(key) })).id, db.id);
  });

  test('5. unknown key, missing or wrong secret → 401, checked before the key’s database (403)', async () => {
    const cases: Record<string, string>[] = [
      { 'api-key': key.key },
      { 'api-key': key.key, 'api-secret': '' },
      wrongSecret(),
      { 'api-key': key.key, 'api-secret': key.secret.toUpperCase() },
      { 'api-key': key.key, 'api-secret': `${key.secret}x` },
      { 'api-key': key.key, 'api-secret': foreign.secret },
      { 'api-key': newId(), 'api-secret': key.secret },
      { 'api-key': 'junk', 'api-secret': key.secret },
      { 'api-key': '', 'api-secret': '' },
      { 'api-key': foreign.key, 'api-secret': key.secret },
      { 'api-key': foreign.key },
    ];
    for (const headers of cases) {
      const message = assertError(await call(service, 'GET', dbUrl(db.id), headers), 401, 'unauthorized');
      assert.ok(!message.includes(key.secret) && !message.includes(foreign.secret), 'no secret in the message');
      assertError(await call(service, 'GET', dbUrl(db.id), { ...as('stranger'), ...headers }), 401, 'unauthorized');
    }
  });

  test('5. a key of another database → 403', async () => {
    assertError(await call(service, 'GET', dbUrl(db.id), withKey(foreign)), 403, 'forbidden');
    assertError(await call(service, 'GET', dbUrl(db.id), { ...as('stranger'), ...withKey(foreign) }), 403, 'forbidden');
    // The other database's owner, presenting their own key here, is still a stranger here.
    assertError(
      await call(service, 'GET', dbUrl(db.id), { ...as('other-owner'), ...withKey(foreign) }),
      403,
      'forbidden',
    );
  });

  test('6. an identity that is not an owner → 403', async () => {
    assertError(await call(service, 'GET', dbUrl(db.id), as('stranger')), 403, 'forbidden');
    assertError(await call(service, 'GET', dbUrl(db.id), as('other-owner')), 403, 'forbidden');
    assertError(
      await call(service, 'GET', dbUrl(db.id), { ...as('stranger'), 'api-secret': key.secret }),
      403,
      'forbidden',
    );
  });

  test('every database-scoped endpoint applies the same rules, and a refused request changes nothing', async () => {
    const before = await getDatabase(service, db.id, as('owner'));
    const endpoints: { method: string; suffix: string; body?: Payload }[] = [
      { method: 'GET', suffix: '' },
      { method: 'PATCH', suffix: '', body: { name: 'hacked' } },
      { method: 'DELETE', suffix: '' },
      { method: 'POST', suffix: ':createApiKey', body: { name: 'intruder' } },
      { method: 'POST', suffix: ':deleteApiKey', body: { key: key.key } },
      { method: 'POST', suffix: ':addOwner', body: { owner_id: 'intruder' } },
      { method: 'POST', suffix: ':deleteOwner', body: { owner_id: 'owner' } },
    ];
    const refusals: { headers: Record<string, string>; status: number; code: string; unknownDb?: boolean }[] = [
      { headers: {}, status: 401, code: 'unauthorized' },
      { headers: identity('not json'), status: 401, code: 'unauthorized' },
      { headers: { ...identity('{}'), ...withKey(key) }, status: 401, code: 'unauthorized' },
      { headers: wrongSecret(), status: 401, code: 'unauthorized' },
      { headers: { 'api-key': newId(), 'api-secret': newId() }, status: 401, code: 'unauthorized' },
      { headers: withKey(foreign), status: 403, code: 'forbidden' },
      { headers: as('stranger'), status: 403, code: 'forbidden' },
      { headers: as('owner'), status: 404, code: 'not_found', unknownDb: true },
      { headers: withKey(key), status: 404, code: 'not_found', unknownDb: true },
    ];
    for (const endpoint of endpoints) {
      for (const refusal of refusals) {
        const id = refusal.unknownDb ? newId() : db.id;
        const response = await call(
          service,
          endpoint.method,
          dbUrl(id, endpoint.suffix),
          refusal.headers,
          endpoint.body,
        );
        assertError(response, refusal.status, refusal.code);
      }
    }
    assert.deepEqual(await getDatabase(service, db.id, as('owner')), before);
    assert.deepEqual(await getDatabase(service, db.id, withKey(key)), before);
  });
});

describe('key verification cache', () => {
  let db: DatabaseBody;
  let key: CreatedKey;
  let repository: DatabaseRepository;

  before(async () => {
    db = await createDatabase(service, 'cache-owner');
    key = await createApiKey(service, db.id, as('cache-owner'));
    repository = new DatabaseRepository(service.store.sql, service.store.notifier);
  });

  test('a success is cached: concurrent and repeated checks of a pair cost one bcrypt', async () => {
    const access = new DocdbAccess(repository, service.store.notifier);
    try {
      const records = await Promise.all(
        Array.from({ length: 5 }, () => access.authorize(requestWith(withKey(key)), db.id)),
      );
      for (const record of records) assert.equal(record.id, db.id);
      assert.equal(access.verifications, 1);
      for (let i = 0; i < 3; i++) await access.authorize(requestWith(withKey(key)), db.id);
      assert.equal(access.verifications, 1);
    } finally {
      access.close();
    }
  });

  test('the database record is read once, and read again after any change made through any repository of the store', async () => {
    const record = await repository.get(db.id);
    assert.equal(await repository.get(db.id), record, 'served from the cache');
    assert.ok(Object.isFrozen(record) && Object.isFrozen(record!.api_keys), 'shared records cannot be changed');
    // Changed through the service's own repository: this one sees it at once.
    const added = await createApiKey(service, db.id, as('cache-owner'), 'added');
    const after = await repository.get(db.id);
    assert.notEqual(after, record);
    assert.ok(after!.api_keys.includes(added.key));
    assert.ok(await repository.deleteKey(db.id, added.key));
    assert.ok(!(await repository.get(db.id))!.api_keys.includes(added.key));
  });

  test('failures are never cached; secrets that cannot be ours cost no bcrypt', async () => {
    const access = new DocdbAccess(repository, service.store.notifier);
    try {
      const wrong = { key: key.key, secret: newId() };
      for (let i = 0; i < 2; i++)
        await assert.rejects(access.authorize(requestWith(withKey(wrong)), db.id), { status: 401 });
      assert.equal(access.verifications, 2);
      await assert.rejects(access.authorize(requestWith(withKey({ key: key.key, secret: 'x'.repeat(5000) })), db.id), {
        status: 401,
      });
      await assert.rejects(access.authorize(requestWith(withKey({ key: 'not-a-key', secret: key.secret })), db.id), {
        status: 401,
      });
      assert.equal(access.verifications, 2);
      // The right secret still works afterwards.
      assert.equal((await access.authorize(requestWith(withKey(key)), db.id)).id, db.id);
    } finally {
      access.close();
    }
  });

  test('a cached success expires after the TTL', async () => {
    // Long enough that a bcrypt check on a loaded machine cannot outlast it.
    const access = new DocdbAccess(repository, service.store.notifier, 1_000);
    try {
      await access.authorize(requestWith(withKey(key)), db.id);
      await access.authorize(requestWith(withKey(key)), db.id);
      assert.equal(access.verifications, 1);
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      await access.authorize(requestWith(withKey(key)), db.id);
      assert.equal(access.verifications, 2);
    } finally {
      access.close();
    }
  });

  test('revocations published by any instance evict: {key}, {database}, and anything unreadable clears all', async () => {
    const access = new DocdbAccess(repository, service.store.notifier);
    const second = await createApiKey(service, db.id, as('cache-owner'), 'second');
    try {
      const warm = async () => {
        await access.authorize(requestWith(withKey(key)), db.id);
        await access.authorize(requestWith(withKey(second)), db.id);
      };
      const publish = async (message: string) => {
        const delivered = nextMessage(service.store, DOCDB_KEYS_REVOKED_TOPIC, () => true);
        await service.store.notifier.publish(DOCDB_KEYS_REVOKED_TOPIC, message);
        await delivered;
      };
      await warm();
      assert.equal(access.verifications, 2);
      await publish(JSON.stringify({ key: key.key }));
      await warm();
      assert.equal(access.verifications, 3, 'only the revoked key is checked again');
      await publish(JSON.stringify({ database: newId() }));
      await warm();
      assert.equal(access.verifications, 3, 'another database: nothing evicted');
      await publish(JSON.stringify({ database: db.id }));
      await warm();
      assert.equal(access.verifications, 5, 'every key of the database');
      await publish('"garbage"');
      await warm();
      assert.equal(access.verifications, 7, 'everything');
    } finally {
      access.close();
    }
  });

  test('a check that raced a revocation is not cached', async () => {
    // The revocation lands while the check is between its key lookup and its bcrypt.
    let revokeDuringLookup = true;
    const racing = {
      get: (id: string) => repository.get(id),
      findKey: async (k: string) => {
        const stored = await repository.findKey(k);
        if (revokeDuringLookup) access.forgetKey(k);
        return stored;
      },
    } as unknown as DatabaseRepository;
    const access = new DocdbAccess(racing, service.store.notifier);
    try {
      await access.authorize(requestWith(withKey(key)), db.id);
      revokeDuringLookup = false;
      await access.authorize(requestWith(withKey(key)), db.id);
      await access.authorize(requestWith(withKey(key)), db.id);
      assert.equal(access.verifications, 2, 'checked again once, then cached');
    } finally {
      access.close();
    }
  });

  test('a notifier resync drops every cached check; close unsubscribes', async () => {
    const handlers = new Map<string, (message: string) => void>();
    const resyncs = new Set<() => void>();
    const notifier: Notifier = {
      async publish() {},
      subscribe(topic, handler) {
        handlers.set(topic, handler);
        return () => handlers.delete(topic);
      },
      onResync(handler) {
        resyncs.add(handler);
        return () => resyncs.delete(handler);
      },
      crossInstance: false,
      async fence() {},
      async close() {},
    };
    const access = new DocdbAccess(repository, notifier);
    assert.ok(handlers.has(DOCDB_KEYS_REVOKED_TOPIC));
    await access.authorize(requestWith(withKey(key)), db.id);
    await access.authorize(requestWith(withKey(key)), db.id);
    assert.equal(access.verifications, 1);
    for (const resync of resyncs) resync();
    await access.authorize(requestWith(withKey(key)), db.id);
    assert.equal(access.verifications, 2);
    access.close();
    assert.equal(handlers.size, 0);
    assert.equal(resyncs.size, 0);
  });

  test('requireUser answers the identity’s user id or 401', () => {
    const access = new DocdbAccess(repository, service.store.notifier);
    try {
      assert.equal(access.requireUser(requestWith(as('someone'))), 'someone');
      for (const headers of [{}, { 'x-gateway-authentication': 'nope' }, withKey(key)]) {
        assert.throws(() => access.requireUser(requestWith(headers)), { status: 401, code: 'unauthorized' });
      }
    } finally {
      access.close();
    }
  });
});

describe('revocation across instances', () => {
  let storeB: Store;
  let appB: ServiceApp;

  before(async () => {
    // A second instance: on PostgreSQL its own connections and LISTEN; embedded, the same store
    // (one process) but its own app, so its own key cache.
    storeB = testDialect === 'postgres' ? await openStore(service.settings) : service.store;
    appB = await docdbService.build({
      settings: service.settings,
      store: storeB,
      logger: pino({ level: 'silent' }),
      version: VERSION,
    });
    await appB.ready();
  });

  after(async () => {
    await appB.close();
    if (storeB !== service.store) await storeB.close();
  });

  const onB = (method: 'GET' | 'POST', url: string, headers: Record<string, string>, payload?: object) =>
    appB.inject({
      method,
      url,
      headers: payload ? { ...headers, 'content-type': 'application/json' } : headers,
      ...(payload ? { payload: JSON.stringify(payload) } : {}),
    });

  test('a deleted key stops working on every instance at once', async () => {
    const db = await createDatabase(service, 'multi-owner');
    const key = await createApiKey(service, db.id, as('multi-owner'));
    // Both instances have checked (and cached) the key.
    assert.equal((await onB('GET', dbUrl(db.id), withKey(key))).statusCode, 200);
    await getDatabase(service, db.id, withKey(key));

    const revoked = nextMessage(storeB, DOCDB_KEYS_REVOKED_TOPIC, (m) => (m as { key?: string }).key === key.key);
    assert.equal(
      (await call(service, 'POST', dbUrl(db.id, ':deleteApiKey'), as('multi-owner'), { key: key.key })).statusCode,
      204,
    );
    // Immediately, before anything else happens, on both instances.
    assertError(await onB('GET', dbUrl(db.id), withKey(key)), 401, 'unauthorized');
    assertError(await call(service, 'GET', dbUrl(db.id), withKey(key)), 401, 'unauthorized');
    // And the revocation reaches the other instance's notifier, which drops its cached check.
    assert.deepEqual(await revoked, { key: key.key });
  });

  test('a deleted database’s keys are unknown (401, no longer 403) on every instance at once', async () => {
    const doomed = await createDatabase(service, 'multi-db');
    const survivor = await createDatabase(service, 'multi-db');
    const key = await createApiKey(service, doomed.id, as('multi-db'));
    assert.equal((await onB('GET', dbUrl(doomed.id), withKey(key))).statusCode, 200);
    assertError(await onB('GET', dbUrl(survivor.id), withKey(key)), 403, 'forbidden');

    const revoked = nextMessage(
      storeB,
      DOCDB_KEYS_REVOKED_TOPIC,
      (m) => (m as { database?: string }).database === doomed.id,
    );
    assert.equal((await call(service, 'DELETE', dbUrl(doomed.id), as('multi-db'))).statusCode, 200);
    assertError(await onB('GET', dbUrl(survivor.id), withKey(key)), 401, 'unauthorized');
    assertError(await onB('GET', dbUrl(doomed.id), withKey(key)), 404, 'not_found');
    assertError(
      await onB('POST', dbUrl(survivor.id, ':addOwner'), withKey(key), { owner_id: 'x' }),
      401,
      'unauthorized',
    );
    assert.deepEqual(await revoked, { database: doomed.id });
  });

  test('owner changes made on one instance apply on the other at once', async () => {
    const db = await createDatabase(service, 'multi-owners');
    assertError(await onB('GET', dbUrl(db.id), as('multi-new')), 403, 'forbidden');
    assert.equal(
      (await call(service, 'POST', dbUrl(db.id, ':addOwner'), as('multi-owners'), { owner_id: 'multi-new' }))
        .statusCode,
      200,
    );
    assert.equal((await onB('GET', dbUrl(db.id), as('multi-new'))).statusCode, 200);
    assert.equal(
      (await onB('POST', dbUrl(db.id, ':deleteOwner'), as('multi-owners'), { owner_id: 'multi-new' })).statusCode,
      200,
    );
    assertError(await call(service, 'GET', dbUrl(db.id), as('multi-new')), 403, 'forbidden');
  });
});

describe('secrets stay secret', () => {
  test('no secret appears in the logs, even at trace level, nor in error messages', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString('utf8'));
        done();
      },
    });
    const app = await docdbService.build({
      settings: service.settings,
      store: service.store,
      logger: pino({ level: 'trace' }, sink),
      version: VERSION,
    });
    await app.ready();
    try {
      const inject = (
        method: 'GET' | 'POST' | 'DELETE',
        url: string,
        headers: Record<string, string>,
        payload?: object,
      ) =>
        app.inject({
          method,
          url,
          headers: payload ? { ...headers, 'content-type': 'application/json' } : headers,
          ...(payload ? { payload: JSON.stringify(payload) } : {}),
        });
      const db = (await inject('POST', '/v1/databases', as('log-owner'), { name: 'logged' })).json() as DatabaseBody;
      const created = await inject('POST', dbUrl(db.id, ':createApiKey'), as('log-owner'), { name: 'k' });
      const key = created.json() as CreatedKey;
      const bodies = [
        (await inject('GET', dbUrl(db.id), withKey(key))).body,
        (await inject('GET', dbUrl(db.id), { 'api-key': key.key, 'api-secret': `${key.secret.slice(0, -1)}0` })).body,
        (await inject('GET', dbUrl(newId()), withKey(key))).body,
        (await inject('POST', dbUrl(db.id, ':deleteApiKey'), as('log-owner'), { key: key.secret })).body,
        (await inject('POST', dbUrl(db.id, ':deleteApiKey'), as('log-owner'), { key: key.key })).body,
        (await inject('GET', dbUrl(db.id), withKey(key))).body,
        (await inject('DELETE', dbUrl(db.id), as('log-owner'))).body,
      ];
      for (const body of bodies) assert.ok(!body.includes(key.secret), body);
      assert.ok(!lines.join('').includes(key.secret), 'the secret was logged');
    } finally {
      await app.close();
    }
  });
});
