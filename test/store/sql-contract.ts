import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SqlDatabase } from '../../src/store/sql/types.ts';
import { all, first, run } from '../../src/store/sql-work.ts';

/**
 * The behaviour every SqlDatabase adapter must have (in the manner of Hono's `runTest({ newRouter })`
 * router suite: one body of cases, one call per adapter). `make` gives an empty database the suite
 * may create tables in; each case uses its own tables.
 */
export function runSqlContract(
  name: string,
  make: () => Promise<{ database: SqlDatabase; cleanup(): Promise<void> }>,
): void {
  describe(`SQL port contract: ${name}`, () => {
    let database: SqlDatabase;
    let cleanup: () => Promise<void>;
    let tables = 0;

    /** A fresh table named for the case, created by the port itself. */
    const table = async (columns: string): Promise<string> => {
      const name = `contract_${++tables}`;
      await database.write(() => run(`create table ${name} (${columns})`));
      return name;
    };

    before(async () => {
      ({ database, cleanup } = await make());
    });
    after(async () => {
      await cleanup();
    });

    it('reads rows, the first row or none, and counts changed rows', async () => {
      const t = await table('id text primary key, v text not null');
      assert.equal(
        await database.write(() =>
          run(`insert into ${t} (id, v) values (?, ?), (?, ?), (?, ?)`, 'a', 'x', 'b', 'y', 'c', 'x'),
        ),
        3,
      );
      assert.deepEqual(await database.read(() => all(`select id from ${t} where v = ? order by id`, 'x')), [
        { id: 'a' },
        { id: 'c' },
      ]);
      assert.deepEqual(await database.read(() => first(`select v from ${t} where id = ?`, 'b')), { v: 'y' });
      assert.equal(await database.read(() => first(`select v from ${t} where id = ?`, 'zz')), undefined);
      assert.equal(await database.write(() => run(`update ${t} set v = ? where v = ?`, 'z', 'x')), 2);
      assert.equal(await database.write(() => run(`delete from ${t} where id = ?`, 'nope')), 0);
    });

    it('commits a write whole, and rolls a throwing write back whole', async () => {
      const t = await table('id text primary key, n integer not null');
      await database.write(function* () {
        yield* run(`insert into ${t} (id, n) values (?, ?)`, 'a', 1);
        const row = yield* first<{ n: number }>(`select n from ${t} where id = ?`, 'a');
        assert.equal(row?.n, 1, 'a write reads its own changes');
        yield* run(`update ${t} set n = n + 1 where id = ?`, 'a');
      });
      const failure = new Error('changed my mind');
      await assert.rejects(
        database.write(function* () {
          yield* run(`update ${t} set n = 100 where id = ?`, 'a');
          yield* run(`insert into ${t} (id, n) values (?, ?)`, 'b', 1);
          throw failure;
        }),
        (error) => error === failure,
      );
      assert.deepEqual(await database.read(() => all(`select id, n from ${t} order by id`)), [{ id: 'a', n: 2 }]);
    });

    it('a failing statement rejects its write and undoes only that write among concurrent ones', async () => {
      const t = await table('id text primary key');
      const attempts = Array.from({ length: 40 }, (_, i) =>
        database.write(function* () {
          yield* run(`insert into ${t} (id) values (?)`, `w${i}`);
          // Every fifth write collides with a row it inserted itself: that whole write must vanish.
          if (i % 5 === 0) yield* run(`insert into ${t} (id) values (?)`, `w${i}`);
          return i;
        }),
      );
      const outcomes = await Promise.allSettled(attempts);
      const failed = outcomes.flatMap((outcome, i) => (outcome.status === 'rejected' ? [i] : []));
      assert.deepEqual(failed, [0, 5, 10, 15, 20, 25, 30, 35]);
      for (const i of failed) assert.ok(database.isUniqueViolation((outcomes[i] as PromiseRejectedResult).reason));
      const stored = (await database.read(() => all<{ id: string }>(`select id from ${t}`)))
        .map((row) => row.id)
        .sort();
      const expected = Array.from({ length: 40 }, (_, i) => i)
        .filter((i) => i % 5 !== 0)
        .map((i) => `w${i}`)
        .sort();
      assert.deepEqual(stored, expected);
    });

    it('a work that catches its failing statement goes on in the same write', async () => {
      const t = await table('id text primary key');
      const outcome = await database.write(function* () {
        yield* run(`insert into ${t} (id) values (?)`, 'a');
        try {
          // `on conflict` is the way to survive a collision on both databases; a caught error
          // only reaches the work, it does not mean the statement's effects are kept.
          yield* run(`insert into ${t} (id) values (?) on conflict (id) do nothing`, 'a');
        } catch {
          return 'threw';
        }
        return 'went on';
      });
      assert.equal(outcome, 'went on');
    });

    it('claims each row once under concurrent locking claims', async () => {
      const t = await table('id integer primary key, owner text');
      await database.write(function* () {
        for (let id = 1; id <= 30; id++) yield* run(`insert into ${t} (id) values (?)`, id);
      });
      const claim = (owner: string) =>
        database.write(function* () {
          const row = yield* first<{ id: number }>(
            `select id from ${t} where owner is null order by id limit 1${database.syntax.forUpdateSkipLocked}`,
          );
          if (!row) return undefined;
          const changed = yield* run(`update ${t} set owner = ? where id = ? and owner is null`, owner, row.id);
          assert.equal(changed, 1, `row ${row.id} was free when locked`);
          return Number(row.id);
        });
      const claimed: number[] = [];
      for (let round = 0; round < 10 && claimed.length < 30; round++) {
        const got = await Promise.all(Array.from({ length: 12 }, (_, i) => claim(`worker-${round}-${i}`)));
        claimed.push(...got.filter((id): id is number => id !== undefined));
      }
      assert.equal(new Set(claimed).size, claimed.length, 'no row claimed twice');
      assert.deepEqual(
        [...claimed].sort((a, b) => a - b),
        Array.from({ length: 30 }, (_, i) => i + 1),
      );
    });

    it('keeps a row read for update from changing under a concurrent read-modify-write', async () => {
      const t = await table('id text primary key, n integer not null');
      await database.write(() => run(`insert into ${t} (id, n) values (?, ?)`, 'counter', 0));
      await Promise.all(
        Array.from({ length: 25 }, () =>
          database.write(function* () {
            const row = yield* first<{ n: number }>(
              `select n from ${t} where id = ?${database.syntax.forUpdate}`,
              'counter',
            );
            yield* run(`update ${t} set n = ? where id = ?`, Number(row!.n) + 1, 'counter');
          }),
        ),
      );
      assert.deepEqual(await database.read(() => first(`select n from ${t} where id = ?`, 'counter')), { n: 25 });
    });

    it('upserts: do nothing on conflict, or update from excluded, with returning', async () => {
      const t = await table('id text primary key, v text not null, hits integer not null default 1');
      assert.equal(
        await database.write(() =>
          run(`insert into ${t} (id, v) values (?, ?) on conflict (id) do nothing`, 'a', 'first'),
        ),
        1,
      );
      assert.equal(
        await database.write(() =>
          run(`insert into ${t} (id, v) values (?, ?) on conflict (id) do nothing`, 'a', 'second'),
        ),
        0,
      );
      const returned = await database.write(() =>
        all<{ v: string; hits: number }>(
          `insert into ${t} (id, v) values (?, ?) on conflict (id) do update set v = excluded.v, hits = ${t}.hits + 1 returning v, hits`,
          'a',
          'third',
        ),
      );
      assert.deepEqual(returned, [{ v: 'third', hits: 2 }]);
    });

    it('returns 64-bit integers, counts and sums as numbers, exactly up to 2^53 - 1', async () => {
      const t = await table('id text primary key, n bigint not null');
      const big = Number.MAX_SAFE_INTEGER;
      await database.write(() =>
        run(
          `insert into ${t} (id, n) values (?, ?), (?, ?), (?, ?)`,
          'max',
          big,
          'ms',
          1_798_000_000_000,
          'more',
          2_000_000_000_123,
        ),
      );
      assert.deepEqual(await database.read(() => first(`select n from ${t} where id = ?`, 'max')), { n: big });
      const totals = await database.read(() =>
        first<{ count: unknown; total: unknown }>(
          `select count(*) as count, sum(n) as total from ${t} where id <> ?`,
          'max',
        ),
      );
      assert.deepEqual(totals, { count: 2, total: 3_798_000_000_123 });
    });

    it('returns JSON stored as text byte for byte, key order and spacing kept', async () => {
      const t = await table('id text primary key, body text not null');
      const body = '{"b": 1, "a":[1,2,{"x":"é\\u0000"}], "emoji":"😀", "z":null}';
      await database.write(() => run(`insert into ${t} (id, body) values (?, ?)`, 'doc', body));
      assert.deepEqual(await database.read(() => first(`select body from ${t} where id = ?`, 'doc')), { body });
    });

    it('stores binary values and measures text and binary in bytes', async () => {
      const t = await table(`id text primary key, bytes ${database.syntax.types.blob}, label text`);
      const bytes = Buffer.from([0, 1, 2, 255, 254, 0]);
      await database.write(() => run(`insert into ${t} (id, bytes, label) values (?, ?, ?)`, 'b', bytes, 'é€😀'));
      const row = await database.read(() =>
        first<{ bytes: Uint8Array; blob_length: number; text_length: number; at: number; absent: number }>(
          `select bytes, ${database.syntax.byteLength('bytes')} as blob_length, ${database.syntax.byteLength('label')} as text_length, ` +
            `${database.syntax.position('label', '?')} as at, ${database.syntax.position('label', '?')} as absent from ${t} where id = ?`,
          '€',
          'x',
          'b',
        ),
      );
      assert.ok(row);
      assert.deepEqual(Buffer.from(row.bytes), bytes);
      assert.equal(Number(row.blob_length), 6);
      assert.equal(Number(row.text_length), 2 + 3 + 4);
      assert.equal(Number(row.at), 2);
      assert.equal(Number(row.absent), 0);
    });

    it('numbers rows in creation order with the serial primary key type', async () => {
      const t = await table(`seq ${database.syntax.types.serialPrimaryKey}, v text not null`);
      const seqs: number[] = [];
      for (const v of ['a', 'b', 'c']) {
        const [row] = await database.write(() =>
          all<{ seq: number }>(`insert into ${t} (v) values (?) returning seq`, v),
        );
        seqs.push(Number(row!.seq));
      }
      assert.ok(seqs[0]! < seqs[1]! && seqs[1]! < seqs[2]!, String(seqs));
    });

    it('pages a large table by key without gaps or repeats', async () => {
      const t = await table('seq integer primary key, v text not null');
      const COUNT = 2_500;
      await database.write(function* () {
        for (let seq = 1; seq <= COUNT; seq++) yield* run(`insert into ${t} (seq, v) values (?, ?)`, seq, `v${seq}`);
      });
      const seen: number[] = [];
      let after = 0;
      for (;;) {
        const page = await database.read(() =>
          all<{ seq: number }>(`select seq from ${t} where seq > ? order by seq limit ?`, after, 1_000),
        );
        if (page.length === 0) break;
        seen.push(...page.map((row) => Number(row.seq)));
        after = seen[seen.length - 1]!;
      }
      assert.deepEqual(
        seen,
        Array.from({ length: COUNT }, (_, i) => i + 1),
      );
    });

    it('binds many rows as row sources: inserted in order, looked up, every value kept', async () => {
      const t = await table(
        `seq ${database.syntax.types.serialPrimaryKey}, n bigint not null, body text not null, k ${database.syntax.types.blob} not null`,
      );
      const columns = [
        { name: 'n', type: 'bigint' },
        { name: 'body', type: 'text' },
        { name: 'k', type: 'blob' },
      ] as const;
      assert.deepEqual(database.syntax.rowSources(columns, []), []);
      // 1,500 rows cross SQLite's largest values list; texts and bytes that need escaping somewhere.
      const rows = Array.from({ length: 1_500 }, (_, i) => [
        i,
        `{"i":${i},"q":"\\"\\\\ ' ,{}é😀"}`,
        Buffer.from([i % 256, 0, 34, 92, 123, 44, 255]),
      ]);
      const seqs: number[] = [];
      await database.write(function* () {
        const sources = database.syntax.rowSources(columns, rows);
        assert.equal(
          sources.reduce((sum, source) => sum + source.count, 0),
          rows.length,
        );
        for (const { source, params } of sources) {
          const inserted = yield* all<{ seq: number }>(
            `insert into ${t} (n, body, k) select v.n, v.body, v.k from ${source} order by v.n returning seq`,
            ...params,
          );
          seqs.push(...inserted.map((row) => Number(row.seq)).sort((a, b) => a - b));
        }
      });
      const stored = await database.read(() =>
        all<{ seq: number; n: number; body: string; k: Uint8Array }>(`select seq, n, body, k from ${t} order by seq`),
      );
      assert.deepEqual(
        stored.map((row) => [Number(row.n), row.body, Buffer.from(row.k)]),
        rows,
      );
      assert.deepEqual(
        stored.map((row) => Number(row.seq)),
        seqs,
        'each row numbered in the order of the sources',
      );
      const wanted = [rows[7]![2], Buffer.from('absent'), rows[1_499]![2]].map((k) => [k]);
      const found: number[] = [];
      for (const { source, params } of database.syntax.rowSources([{ name: 'k', type: 'blob' }], wanted)) {
        const hits = await database.read(() =>
          all<{ n: number }>(`select n from ${t} where n < ? and k in (select v.k from ${source})`, 256, ...params),
        );
        found.push(...hits.map((row) => Number(row.n)));
      }
      assert.deepEqual(
        found.sort((a, b) => a - b),
        [7, 219], // 1,499 % 256: the same bytes as row 219
      );
    });

    it('analyze: the planner learns the size of a table where it plans from statistics', async () => {
      const t = await table('id integer primary key, v text');
      await database.write(function* () {
        for (let id = 1; id <= 500; id++) yield* run(`insert into ${t} (id, v) values (?, ?)`, id, `v${id}`);
      });
      await database.analyze([t]);
      if (database.dialect === 'postgres') {
        const row = await database.read(() =>
          first<{ rows: number }>('select reltuples as rows from pg_class where oid = to_regclass(?)', t),
        );
        assert.equal(Number(row?.rows), 500);
      }
      // The rows are untouched either way.
      assert.equal((await database.read(() => first<{ n: number }>(`select count(*) as n from ${t}`)))?.n, 500);
    });

    it('fastCompression: new values are compressed with lz4 where the server has it, and read back whole', async () => {
      const t = await table(`id integer primary key, data ${database.syntax.types.blob} not null`);
      for (const statement of database.syntax.fastCompression(t, 'data')) await database.write(() => run(statement));
      const value = Buffer.from('a log line that repeats\n'.repeat(4_000));
      await database.write(() => run(`insert into ${t} (id, data) values (?, ?)`, 1, value));
      const row = await database.read(() => first<{ data: Buffer }>(`select data from ${t} where id = ?`, 1));
      assert.ok(row && Buffer.compare(row.data, value) === 0);
      if (database.dialect === 'postgres') {
        const lz4 = await database.read(() =>
          first(`select 1 as yes from pg_settings where name = 'default_toast_compression' and 'lz4' = any(enumvals)`),
        );
        const method = await database.read(() =>
          first<{ method: string | null }>(`select pg_column_compression(data) as method from ${t} where id = ?`, 1),
        );
        assert.equal(method?.method, lz4 ? 'lz4' : 'pglz');
      }
    });

    it('writeEach: each statement atomic by itself, results as a write gives them', async () => {
      const t = await table('id integer primary key, owner text');
      await database.write(function* () {
        for (let id = 1; id <= 20; id++) yield* run(`insert into ${t} (id) values (?)`, id);
      });
      // A claim in one statement, as the scheduler's: concurrent ones take different rows.
      const claim = (owner: string) =>
        database.writeEach(function* () {
          const row = yield* first<{ id: number }>(
            `update ${t} set owner = ? where id = (select id from ${t} where owner is null order by id limit 1${database.syntax.forUpdateSkipLocked}) returning id`,
            owner,
          );
          if (row) return Number(row.id);
          // Then only reads: why nothing was claimed.
          return (yield* first<{ free: number }>(`select count(*) as free from ${t} where owner is null`))?.free;
        });
      const claimed = await Promise.all(Array.from({ length: 20 }, (_, i) => claim(`w${i}`)));
      assert.deepEqual(
        [...claimed].sort((a, b) => Number(a) - Number(b)),
        Array.from({ length: 20 }, (_, i) => i + 1),
      );
      assert.equal(await claim('late'), 0);
      await assert.rejects(
        database.writeEach(() => run(`insert into ${t} (id) values (?)`, 1)),
        (error) => database.isUniqueViolation(error),
      );
    });

    it('readLarge: rows with large binary values, every type and null kept; parameters quoted, not spliced', async () => {
      const t = await table(`id bigint primary key, name text, data ${database.syntax.types.blob}`);
      const big = Buffer.alloc(3 * 1024 * 1024 + 7, 0);
      for (let i = 0; i < big.length; i += 4093) big[i] = i % 256;
      const odd = "it's \\ a 'name' ünïcödé";
      for (const { source, params } of database.syntax.rowSources(
        [
          { name: 'id', type: 'bigint' },
          { name: 'name', type: 'text' },
          { name: 'data', type: 'blob' },
        ],
        [
          [1, odd, big],
          [2, 'empty', Buffer.alloc(0)],
          [3, 'other', Buffer.from([0, 1, 2, 255])],
        ],
      ))
        await database.write(() =>
          run(`insert into ${t} (id, name, data) select v.id, v.name, v.data from ${source}`, ...params),
        );
      await database.write(() => run(`insert into ${t} (id, name, data) values (?, null, null)`, 2 ** 40));
      const columns = [
        { name: 'id', type: 'bigint' },
        { name: 'name', type: 'text' },
        { name: 'data', type: 'blob' },
      ] as const;
      const rows = await database.readLarge<{ id: number; name: string | null; data: Buffer | null }>(
        `select id, name, data from ${t} where id > ? and name is distinct from ? order by id`,
        [0, 'other'],
        columns,
      );
      assert.deepEqual(
        rows.map((row) => [Number(row.id), row.name, row.data === null ? null : Buffer.from(row.data).length]),
        [
          [1, odd, big.length],
          [2, 'empty', 0],
          [2 ** 40, null, null],
        ],
      );
      assert.ok(Buffer.from(rows[0]!.data!).equals(big));
      // A quote in a text parameter is a value, not SQL.
      const named = await database.readLarge<{ id: number }>(
        `select id, name, data from ${t} where name = ? order by id`,
        [odd],
        columns,
      );
      assert.deepEqual(
        named.map((row) => Number(row.id)),
        [1],
      );
      assert.deepEqual(
        await database.readLarge(`select id, name, data from ${t} where name = ?`, ["x' or '1'='1"], columns),
        [],
      );
    });

    it('reports a foreign key violation as one', async () => {
      const parent = await table('id text primary key');
      const child = await table(`id text primary key, parent text not null references ${parent} (id)`);
      await database.write(() => run(`insert into ${parent} (id) values (?)`, 'p'));
      await database.write(() => run(`insert into ${child} (id, parent) values (?, ?)`, 'c1', 'p'));
      const error = await database
        .write(() => run(`insert into ${child} (id, parent) values (?, ?)`, 'c2', 'gone'))
        .then(
          () => undefined,
          (reason: unknown) => reason,
        );
      assert.ok(error && database.isForeignKeyViolation(error), String(error));
      assert.equal(database.isUniqueViolation(error), false);
      assert.deepEqual(await database.read(() => all(`select id from ${child}`)), [{ id: 'c1' }]);
    });

    it('keepPrepared: kept statements answer as others do, in reads, writes and transactions, errors included', async () => {
      const t = await table('id text primary key, n integer not null');
      const insert = `insert into ${t} (id, n) values (?, ?)`;
      const select = `select id, n from ${t} where n >= ? order by n`;
      database.keepPrepared?.([insert, select, insert]);
      // More runs than PostgreSQL's five custom plans before it may switch to a generic one.
      for (let n = 0; n < 8; n++) assert.equal(await database.writeEach(() => run(insert, `a${n}`, n)), 1);
      assert.equal(
        await database.write(function* () {
          yield* run(insert, 'b', 100);
          return (yield* all<{ id: string }>(select, 100)).length;
        }),
        1,
      );
      const error = await database.writeEach(() => run(insert, 'a1', 1)).catch((e: unknown) => e);
      assert.equal(database.isUniqueViolation(error), true);
      assert.deepEqual(await database.read(() => all(select, 6)), [
        { id: 'a6', n: 6 },
        { id: 'a7', n: 7 },
        { id: 'b', n: 100 },
      ]);
      // A result that follows the table's columns could change type under a later schema change.
      if (database.keepPrepared) assert.throws(() => database.keepPrepared!([`select * from ${t}`]));
    });
  });
}
