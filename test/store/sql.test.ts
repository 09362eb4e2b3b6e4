import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SqlConnection } from '../../src/store/db.ts';
import { migrate, type MigrationSet } from '../../src/store/migrate.ts';
import { all, first, run } from '../../src/store/sql-work.ts';
import { createTestDatabase, testDialect, type TestDatabase } from '../helpers/database.ts';

// Migrations and connections: the same behaviour from SQLite and PostgreSQL (the suite runs on the
// one `npm test` or `npm run test:pg` selects). The port's own contract is sql-contract.ts.
describe(`SQL connection and migrations (${testDialect})`, () => {
  let database: TestDatabase;
  let connection: SqlConnection;
  let applied = 0;

  const sample: MigrationSet = {
    owner: 'contract',
    migrations: [
      {
        name: '001_items',
        statements: ({ types }) => {
          applied++;
          return [
            `create table contract_items (seq ${types.serialPrimaryKey}, name text not null unique, size ${types.bigint} not null, data ${types.blob})`,
          ];
        },
      },
      {
        name: '002_index',
        statements: () => {
          applied++;
          return ['create index contract_items_size on contract_items (size)'];
        },
      },
    ],
  };

  before(async () => {
    database = await createTestDatabase();
    connection = await database.connect();
  });

  after(async () => {
    await connection.close();
    await database.cleanup();
  });

  const count = async (db = connection) =>
    Number((await db.database.read(() => first<{ n: number }>('select count(*) as n from contract_items')))?.n);

  it('applies each migration once, in order, and records it', async () => {
    assert.deepEqual(await migrate(connection.database, [sample]), ['contract/001_items', 'contract/002_index']);
    assert.deepEqual(await migrate(connection.database, [sample]), []);
    assert.equal(applied, 2);
    const recorded = await connection.database.read(() =>
      all<{ name: string }>('select name from stratus_migrations where owner = ? order by name', 'contract'),
    );
    assert.deepEqual(
      recorded.map((row) => row.name),
      ['001_items', '002_index'],
    );
  });

  it('lets several instances migrate at once without applying anything twice', async () => {
    const late: MigrationSet = {
      owner: 'contract',
      migrations: [
        ...sample.migrations,
        {
          name: '003_column',
          statements: () => {
            applied++;
            return ['alter table contract_items add column note text'];
          },
        },
      ],
    };
    const others = await Promise.all([database.connect(), database.connect()]);
    try {
      // better-sqlite3 is synchronous: connections in one process cannot wait for each other, so
      // on SQLite they take turns here (the e2e suite races two `stratus migrate` processes).
      const results =
        testDialect === 'postgres'
          ? await Promise.all([migrate(connection.database, [late]), ...others.map((c) => migrate(c.database, [late]))])
          : [
              await migrate(connection.database, [late]),
              await migrate(others[0]!.database, [late]),
              await migrate(others[1]!.database, [late]),
            ];
      assert.equal(results.flat().filter((name) => name === 'contract/003_column').length, 1);
      assert.equal(applied, 3);
    } finally {
      await Promise.all(others.map((c) => c.close()));
    }
  });

  it('rolls a failed migration back whole and does not record it', async () => {
    const broken: MigrationSet = {
      owner: 'contract-broken',
      migrations: [{ name: '001_half', statements: () => ['create table contract_half (id text)', 'this is not sql'] }],
    };
    await assert.rejects(migrate(connection.database, [broken]));
    await assert.rejects(connection.database.read(() => all('select * from contract_half')));
    assert.equal(
      await connection.database.read(() =>
        first('select name from stratus_migrations where owner = ?', 'contract-broken'),
      ),
      undefined,
    );
  });

  it('returns 64-bit integers as numbers and blobs as bytes', async () => {
    const big = 2 ** 40 + 3;
    await connection.database.write(() =>
      run('insert into contract_items (name, size, data) values (?, ?, ?)', 'big', big, Buffer.from([1, 2, 3])),
    );
    const row = await connection.database.read(() =>
      first<{ size: number; data: Uint8Array; n: number }>(
        'select size, data, (select count(*) from contract_items) as n from contract_items where name = ?',
        'big',
      ),
    );
    assert.equal(row?.size, big);
    assert.equal(typeof row?.n, 'number');
    assert.deepEqual([...(row?.data ?? [])], [1, 2, 3]);
  });

  it('rolls a failed transaction back and keeps reused statements fresh', async () => {
    const before = await count();
    await assert.rejects(
      connection.database.write(function* () {
        yield* run('insert into contract_items (name, size) values (?, ?)', 'tx-1', 1);
        yield* run('insert into contract_items (name, size) values (?, ?)', 'big', 1); // duplicate name
      }),
    );
    assert.equal(await count(), before);
    await connection.database.write(() => run('insert into contract_items (name, size) values (?, ?)', 'fresh', 1));
    assert.equal(await count(), before + 1, 'the same statement text sees the new row');
  });

  it('tells its commit observer of every committed write, with the writes that shared the commit', async () => {
    const seen: { group: string; calls: number; seconds: number }[] = [];
    connection.database.commitObserver = (group, calls, seconds) => seen.push({ group, calls, seconds });
    try {
      await Promise.all(
        [1, 2, 3, 4].map((n) =>
          connection.database.write(() =>
            run('insert into contract_items (name, size) values (?, ?)', `observed-${n}`, n),
          ),
        ),
      );
    } finally {
      connection.database.commitObserver = null;
    }
    const group = testDialect === 'sqlite' ? 'sqlite_transaction' : 'postgres_transaction';
    assert.ok(seen.length > 0 && seen.every((s) => s.group === group && s.seconds >= 0));
    assert.equal(
      seen.reduce((n, s) => n + s.calls, 0),
      4,
    );
  });

  it('sees writes from another connection at once', async () => {
    const other = await database.connect();
    try {
      await other.database.write(() => run('insert into contract_items (name, size) values (?, ?)', 'from-other', 7));
      assert.deepEqual(
        await connection.database.read(() => all('select size from contract_items where name = ?', 'from-other')),
        [{ size: 7 }],
      );
    } finally {
      await other.close();
    }
  });
});

describe("SQLite group commit (the port's writes)", { skip: testDialect !== 'sqlite' && 'SQLite only' }, () => {
  let database: TestDatabase;
  let connection: SqlConnection;

  before(async () => {
    database = await createTestDatabase();
    connection = await database.connect();
    await connection.database.write(() => run('create table direct_items (name text primary key)'));
  });

  after(async () => {
    await connection.close();
    await database.cleanup();
  });

  const names = async () =>
    (await connection.database.read(() => all<{ name: string }>('select name from direct_items order by name'))).map(
      (r) => r.name,
    );
  const insert = (name: string) => run('insert into direct_items (name) values (?)', name);

  it('runs the writes of one turn together and answers each only after their commit', async () => {
    const events: string[] = [];
    const writes = ['g1', 'g2', 'g3'].map((name) =>
      connection.database
        .write(function* () {
          events.push(`work ${name}`);
          yield* insert(name);
          return name;
        })
        .then((value) => events.push(`done ${value}`)),
    );
    await Promise.all(writes);
    assert.deepEqual(events, ['work g1', 'work g2', 'work g3', 'done g1', 'done g2', 'done g3']);
    assert.deepEqual(await names(), ['g1', 'g2', 'g3']);
  });

  it('undoes only the write that failed', async () => {
    const results = await Promise.allSettled([
      connection.database.write(() => insert('f1')),
      connection.database.write(function* () {
        yield* insert('f2');
        throw new Error('changed my mind');
      }),
      connection.database.write(() => insert('g1')), // duplicate
      connection.database.write(() => insert('f3')),
    ]);
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'rejected', 'rejected', 'fulfilled'],
    );
    assert.deepEqual(await names(), ['f1', 'f3', 'g1', 'g2', 'g3']);
  });

  it('rolls a lone failing write back whole', async () => {
    await assert.rejects(
      connection.database.write(function* () {
        yield* insert('lonely');
        throw new Error('no');
      }),
      /no/,
    );
    assert.ok(!(await names()).includes('lonely'));
    assert.equal(await connection.database.write(() => insert('after')), 1);
  });

  it('a read or write asked for from inside a write waits for its transaction instead of joining it', async () => {
    let seen: Promise<string[]> | undefined;
    let queued: Promise<unknown> | undefined;
    await assert.rejects(
      connection.database.write(function* () {
        yield* insert('k-rolled-back');
        seen = names();
        queued = connection.database.write(() => insert('k-direct'));
        throw new Error('roll back');
      }),
    );
    assert.ok(!(await seen!).includes('k-rolled-back'), 'the read did not see what the transaction had not committed');
    await queued;
    const all = await names();
    assert.ok(all.includes('k-direct'), 'the queued write committed on its own');
    assert.ok(!all.includes('k-rolled-back'));
  });
});
