import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { loadSettings } from '../../../src/config.ts';
import { VERSION } from '../../../src/core/version.ts';
import { createKvService } from '../../../src/services/kv/index.ts';
import { kvMigrations } from '../../../src/services/kv/migrations.ts';
import { KvRepository, LeaseLostError, prefixUpperBound } from '../../../src/services/kv/repository.ts';
import { openSqlite, type SqlConnection } from '../../../src/store/db.ts';
import { migrate } from '../../../src/store/migrate.ts';
import { run } from '../../../src/store/sql-work.ts';
import { migrateStore, openStore } from '../../../src/store/index.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';

const databases: TestDatabase[] = [];
const connections: SqlConnection[] = [];
after(async () => {
  for (const connection of connections) await connection.close();
  for (const database of databases) await database.cleanup();
});

/** A fresh database with the node's tables, and `connect` for a second instance on it. */
async function freshNode(): Promise<{
  database: TestDatabase;
  repository: KvRepository;
  connect(): Promise<KvRepository>;
}> {
  const database = await createTestDatabase();
  databases.push(database);
  const connect = async () => {
    const connection = await database.connect();
    connections.push(connection);
    return new KvRepository(connection.database);
  };
  const first = await database.connect();
  connections.push(first);
  await migrate(first.database, [kvMigrations]);
  return { database, repository: new KvRepository(first.database), connect };
}

describe('kv repository', () => {
  it('trims the replication log to its newest entries, cutting after a key command', async () => {
    const { repository } = await freshNode();
    await repository.createCollection('', 'c', 1);
    await Promise.all(Array.from({ length: 1_000 }, (_, i) => repository.set('', 'c', `k${i % 50}`, String(i), 1)));
    assert.equal((await repository.logAfter(0, 10_000)).length, 1_001);
    assert.equal(await repository.resumePoint(0, false), 0, 'a primary resumes from seq 0 while its log is whole');
    const removed = await repository.trimLog(100);
    const left = await repository.logAfter(0, 10_000);
    assert.equal(removed + left.length, 1_001);
    assert.ok(left.length >= 100 && left.length <= 101, `${left.length} entries left`);
    const state = await repository.state();
    assert.equal(state.logFloor, 1_000 - left.length);
    // A child at the floor resumes with everything kept; one below it needs a baseline.
    const atFloor = await repository.resumePoint(state.logFloor, false);
    assert.ok(atFloor !== null);
    assert.deepEqual(await repository.logAfter(atFloor, 10_000), left);
    assert.equal(left[0]!.id, atFloor + 1, 'no gap between the resume point and the first entry kept');
    assert.equal(await repository.resumePoint(state.logFloor - 1, false), null);
    assert.equal(
      await repository.resumePoint(state.lastSeq + 1, false),
      null,
      'a child ahead of its parent takes a baseline',
    );
    const at = await repository.resumePoint(990, false);
    assert.ok(at !== null);
    assert.equal((await repository.logAfter(at, 100)).length, 10);
    // State is untouched by trimming: 50 keys, each at its last write.
    assert.equal((await repository.totals()).keys, 50);
    const k49 = await repository.get('', 'c', 'k49');
    assert.ok(k49 !== null && !('collection' in k49));
    assert.equal(k49.value, '999');
  });

  it('reopens with every write, seq and version in place', async () => {
    const { connect, repository } = await freshNode();
    await repository.createCollection('p', 'c', 1);
    await repository.set('p', 'c', 'a', '{"x":1}', 10);
    await repository.delete('p', 'c', 'a', 11);
    const reopened = await connect();
    assert.equal((await reopened.state()).lastSeq, 2);
    const again = await reopened.set('p', 'c', 'a', '2', 12);
    assert.ok(typeof again === 'object');
    assert.equal(again.seq, 3);
    assert.equal(again.version, 3);
  });

  it('gives concurrent writers through two connections distinct seqs and one gap-free log', async () => {
    const { repository, connect } = await freshNode();
    const other = await connect();
    await repository.createCollection('', 'c', 1);
    const writes = await Promise.all(
      Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? repository : other).set('', 'c', `k${i % 7}`, String(i), 1)),
    );
    const seqs = writes.map((outcome) => (typeof outcome === 'object' ? outcome.seq : -1)).sort((a, b) => a - b);
    assert.deepEqual(
      seqs,
      Array.from({ length: 200 }, (_, i) => i + 1),
    );
    const log = await other.logAfter(0, 1_000);
    assert.deepEqual(
      log.map((entry) => entry.id),
      Array.from({ length: 201 }, (_, i) => i + 1),
    );
    // Versions per key count every write to it.
    const k0 = await repository.get('', 'c', 'k0');
    assert.ok(k0 !== null && !('collection' in k0));
    assert.equal(k0.version, Math.ceil(200 / 7));
  });

  it('refuses a set in a missing collection without a seq or a log id, and counts versions on through a delete', async () => {
    const { repository } = await freshNode();
    await repository.createCollection('', 'c', 1);
    assert.equal(await repository.set('', 'nope', 'k', '1', 1), 'missing_collection');
    const first = await repository.set('', 'c', 'k', '1', 1);
    assert.ok(typeof first === 'object');
    assert.deepEqual([first.seq, first.version], [1, 1]);
    await repository.delete('', 'c', 'k', 2);
    assert.equal(await repository.set('', 'nope', 'k', '1', 1), 'missing_collection');
    const again = await repository.set('', 'c', 'k', '[2]', 3);
    assert.ok(typeof again === 'object');
    assert.deepEqual([again.seq, again.version], [3, 3]);
    assert.deepEqual(
      (await repository.logAfter(0, 10)).map((entry) => entry.id),
      [1, 2, 3, 4],
    );
    assert.deepEqual(await repository.get('', 'c', 'k'), { key: 'k', value: '[2]', version: 3, seq: 3, updatedAt: 3 });
    const state = await repository.state();
    assert.deepEqual([state.lastSeq, state.lastLogId], [3, 4]);
  });

  it('sorts keys by code point whatever the database collation', async () => {
    const { repository } = await freshNode();
    await repository.createCollection('', 'c', 1);
    const keys = ['b', 'B', 'a', 'é', 'Z', '_', '😀', '\uFFFD', 'aa', 'a b'];
    for (const key of keys) await repository.set('', 'c', key, '1', 1);
    const listed = (await repository.list('', 'c', { prefix: '', limit: 100 }))!.map((entry) => entry.key);
    const byCodePoint = [...keys].sort((x, y) => {
      const a = [...x].map((c) => c.codePointAt(0)!);
      const b = [...y].map((c) => c.codePointAt(0)!);
      for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
      return a.length - b.length;
    });
    assert.deepEqual(listed, byCodePoint);
  });

  it('lets one holder at a time follow the parent, and applies only for the holder', async () => {
    const { repository, connect } = await freshNode();
    const other = await connect();
    assert.equal(await repository.claimLease('a', 1_000, 11_000, { connected: true, ready: false }), true);
    assert.equal(
      await other.claimLease('b', 2_000, 12_000, { connected: false, ready: false }),
      false,
      'a live lease is not taken',
    );
    assert.deepEqual(await other.lease(), { holder: 'a', expiresAt: 11_000, connected: true, ready: false });
    await assert.rejects(
      other.applyFromParent({ type: 'CREATE_COLLECTION', project: '', collection: 'c', timestamp: 1 }, 'b'),
      LeaseLostError,
    );
    assert.equal(await other.hasCollection('', 'c'), false, 'nothing applied without the lease');
    await repository.applyFromParent({ type: 'CREATE_COLLECTION', project: '', collection: 'c', timestamp: 1 }, 'a');
    assert.equal(await other.hasCollection('', 'c'), true);
    assert.equal(
      await other.claimLease('b', 11_001, 21_001, { connected: false, ready: false }),
      true,
      'an expired lease is taken over',
    );
    await assert.rejects(
      repository.applyFromParent({ type: 'DROP_COLLECTION', project: '', collection: 'c', timestamp: 2 }, 'a'),
      LeaseLostError,
    );
    await other.releaseLease('b');
    assert.equal((await repository.lease()).holder, '');
  });

  it('imports a node file of the old layout once, into an empty node', async () => {
    const database = await createTestDatabase();
    databases.push(database);
    const dataDir = database.dataDir;
    const file = join(dataDir, 'kv', 'kv.db');
    mkdirSync(join(dataDir, 'kv'), { recursive: true });
    // The old layout's tables, as the node created them in its own file.
    const old = openSqlite(file);
    await writeOldNodeFile(old);
    await old.close();

    const settings = {
      ...loadSettings({}, {}, dataDir),
      dataDir,
      databaseUrl: database.databaseUrl,
      kvNodeName: 'imported',
      logLevel: 'silent' as const,
    };
    const store = await openStore(settings);
    try {
      await migrateStore(store, [kvMigrations]);
      const app = await createKvService().build({
        settings,
        store,
        logger: pino({ level: 'silent' }),
        version: VERSION,
      });
      const auth = { 'x-gateway-authentication': JSON.stringify({ user: { id: 't' } }) };
      const got = await app.inject({ method: 'GET', url: '/v1/collections/users/keys/alice', headers: auth });
      assert.equal(got.statusCode, 200, got.body);
      // Exact JSON text: the integer beyond 2^53 is kept digit for digit.
      assert.equal(
        got.body,
        '{"key":"alice","value":{"n":12345678901234567890},"version":2,"updatedAt":"2025-01-01T00:00:10Z"}',
      );
      const listed = await app.inject({ method: 'GET', url: '/v1/collections', headers: auth });
      assert.deepEqual(JSON.parse(listed.body), { collections: ['users', 'empty'] });
      // seq and versions continue where the old node stopped.
      const set = await app.inject({
        method: 'POST',
        url: '/v1/collections/users/keys/gone',
        headers: auth,
        payload: '{"value":1}',
      });
      assert.deepEqual(JSON.parse(set.body), { ok: true, seq: 4, version: 2 });
      await app.close();
      assert.equal(existsSync(file), false);
      assert.equal(existsSync(`${file}.imported`), true);
    } finally {
      await store.close();
    }
  });

  it('answers reads from its cache exactly as from the database, through every kind of write', async () => {
    const database = await createTestDatabase();
    databases.push(database);
    const settings = {
      ...loadSettings({}, {}, database.dataDir),
      dataDir: database.dataDir,
      databaseUrl: database.databaseUrl,
      logLevel: 'silent' as const,
    };
    const store = await openStore(settings);
    try {
      await migrateStore(store, [kvMigrations]);
      const cached = new KvRepository(store.sql.database, { feed: store.notifier });
      const plain = new KvRepository(store.sql.database);
      // Every read twice through the cache (a miss, then a hit) and once straight from the database.
      const same = async (key: string, collection = 'c') => {
        const first = await cached.get('p', collection, key);
        assert.deepEqual(await cached.get('p', collection, key), first);
        assert.deepEqual(first, await plain.get('p', collection, key));
        return first;
      };
      assert.deepEqual(await same('a'), { collection: false });
      await cached.createCollection('p', 'c', 1);
      assert.equal(await same('a'), null);
      await cached.set('p', 'c', 'a', '{"x":1}', 10);
      assert.deepEqual(await same('a'), { key: 'a', value: '{"x":1}', version: 1, seq: 1, updatedAt: 10 });
      await cached.set('p', 'c', 'a', '[2]', 11);
      assert.deepEqual(await same('a'), { key: 'a', value: '[2]', version: 2, seq: 2, updatedAt: 11 });
      await cached.delete('p', 'c', 'a', 12);
      assert.equal(await same('a'), null);
      // A replicated write (newer seq) and a late duplicate (older seq, ignored).
      await cached.applyForwarded({
        type: 'SET',
        project: 'p',
        collection: 'c',
        key: 'a',
        value: '3',
        seq: 9,
        version: 4,
        timestamp: 13,
      });
      assert.deepEqual(await same('a'), { key: 'a', value: '3', version: 4, seq: 9, updatedAt: 13 });
      await cached.applyForwarded({
        type: 'SET',
        project: 'p',
        collection: 'c',
        key: 'a',
        value: '0',
        seq: 5,
        version: 3,
        timestamp: 14,
      });
      assert.deepEqual(await same('a'), { key: 'a', value: '3', version: 4, seq: 9, updatedAt: 13 });
      // Keys and collections that share characters stay apart.
      await cached.createCollection('p', 'c:a', 1);
      await cached.set('p', 'c:a', 'b', '"other"', 15);
      await cached.set('p', 'c', 'a:b', '"mine"', 15);
      assert.deepEqual(await same('b', 'c:a'), { key: 'b', value: '"other"', version: 1, seq: 4, updatedAt: 15 });
      assert.deepEqual(await same('a:b'), { key: 'a:b', value: '"mine"', version: 1, seq: 5, updatedAt: 15 });
      // A long key is announced as a change of every key.
      const long = 'k'.repeat(5_000);
      await cached.set('p', 'c', long, '1', 16);
      assert.equal(await same(long).then((entry) => entry !== null && 'value' in entry && entry.value), '1');
      await cached.set('p', 'c', long, '2', 17);
      assert.equal(await same(long).then((entry) => entry !== null && 'value' in entry && entry.value), '2');
      await cached.dropCollection('p', 'c', 18);
      assert.deepEqual(await same('a'), { collection: false });
      assert.deepEqual(await same(long), { collection: false });
      await cached.createCollection('p', 'c', 19);
      assert.equal(await same('a'), null, 'a dropped collection comes back empty');
      cached.close();
    } finally {
      await store.close();
    }
  });

  it('bounds a prefix by the next code point', () => {
    assert.equal(prefixUpperBound('ab'), 'ac');
    assert.equal(prefixUpperBound('a\uD7FF'), 'a\uE000');
    assert.equal(prefixUpperBound('a\u{10FFFF}'), 'b');
    assert.equal(prefixUpperBound(''), null);
  });
});

/** The old node file: two collections, a live key at version 2, a deleted key at version 1, seq 3. */
async function writeOldNodeFile(connection: SqlConnection): Promise<void> {
  const statements = [
    'create table kv_collections (ord integer primary key autoincrement, project text not null, name text not null, mark integer not null default 0, unique (project, name))',
    'create table kv_keys (project text not null, collection text not null, key text not null, value text, version integer not null, seq integer not null, updated_at integer not null, mark integer not null default 0, primary key (project, collection, key)) without rowid',
    'create table kv_log (id integer primary key autoincrement, seq integer, line text not null)',
    'create table kv_meta (name text primary key, value integer not null)',
    "insert into kv_collections (project, name) values ('', 'users'), ('', 'empty')",
    `insert into kv_keys (project, collection, key, value, version, seq, updated_at) values ('', 'users', 'alice', '{"n":12345678901234567890}', 2, 2, 1735689610), ('', 'users', 'gone', null, 1, 3, 1735689600)`,
    `insert into kv_log (seq, line) values (null, '{"type":"CREATE_COLLECTION","collection":"users","timestamp":1}\n'), (1, 'x\n'), (2, 'y\n'), (3, 'z\n')`,
    "insert into kv_meta (name, value) values ('last_seq', 3), ('has_baseline', 1)",
  ];
  await connection.database.write(function* () {
    for (const statement of statements) yield* run(statement);
  });
}
