import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, createWriteStream, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buildMigrationSets } from '../../src/archive-cli.ts';
import { exportArchive } from '../../src/store/archive/export.ts';
import {
  blobEntry,
  decodeValue,
  encodeValue,
  EXCLUDED_TABLES,
  parseManifest,
  type ArchiveManifest,
} from '../../src/store/archive/format.ts';
import { importArchive } from '../../src/store/archive/import.ts';
import type { LoadTarget } from '../../src/store/archive/database.ts';
import { openPostgresTarget } from '../../src/store/archive/postgres.ts';
import { openSqliteTarget } from '../../src/store/archive/sqlite.ts';
import { migrateStore, openStore } from '../../src/store/index.ts';
import { all, run } from '../../src/store/sql-work.ts';
import { testDialect } from '../helpers/database.ts';
import { createStore, type FreshStore } from '../helpers/stores.ts';

// The source is the suite's database; archives load into SQLite (and, with test:pg, PostgreSQL).
const sets = buildMigrationSets();
const sha = (data: string | Uint8Array) => createHash('sha256').update(data).digest('hex');
const BIG = 2n ** 60n + 7n;
const TEXT = 'é\n\t"\\ 😀 — ünïcödé';
const BYTES = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
const BLOB_SMALL = Buffer.from('a small blob, inline on SQLite');
const BLOB_LARGE = Buffer.alloc(200_000, 7);

async function openTarget(place: FreshStore): Promise<LoadTarget> {
  return place.databaseUrl
    ? openPostgresTarget(place.databaseUrl)
    : openSqliteTarget(join(place.dataDir, 'stratus.db'));
}

/** Every table's rows, values as archived, for comparing two stores. */
async function contents(place: FreshStore): Promise<Record<string, string[]>> {
  const target = await openTarget(place);
  try {
    const seen: Record<string, string[]> = {};
    for (const table of await target.tables()) {
      if (
        EXCLUDED_TABLES.has(table.name) ||
        (table.name.startsWith('stratus_blob') && table.name !== 'stratus_blob_refs')
      )
        continue;
      seen[table.name] = (await target.rows(table, 1_000_000)).map((row) =>
        JSON.stringify(table.columns.map((column) => encodeValue(row[column.name]))),
      );
    }
    return seen;
  } finally {
    await target.close();
  }
}

/**
 * Tables holding rows; none for a store an import refused. A refusal after the migrations ran
 * leaves the rows they insert: kv_meta's counters at 0 and kv_follower's free lease.
 */
async function occupied(place: FreshStore): Promise<string[]> {
  const target = await openTarget(place);
  try {
    const found: string[] = [];
    for (const table of await target.tables()) {
      if (table.name === 'stratus_migrations' || (await target.count(table)) === 0) continue;
      const rows = await target.rows(table, 100);
      if (table.name === 'kv_meta' && rows.every((row) => Number(row.value) === 0)) continue;
      if (table.name === 'kv_follower' && rows.every((row) => row.holder === '')) continue;
      found.push(table.name);
    }
    return found;
  } finally {
    await target.close();
  }
}

async function blobExists(place: FreshStore, sha256: string): Promise<boolean> {
  const store = await openStore(place.settings);
  try {
    return (await store.blobs.stat(sha256)) !== null;
  } finally {
    await store.close();
  }
}

describe('archive values and refusals', () => {
  const places: FreshStore[] = [];
  const work = mkdtempSync(join(tmpdir(), 'stratus-archive-test-'));
  let source: FreshStore;
  let good: string;
  let manifest: ArchiveManifest;
  const store = async (dialect: 'sqlite' | 'postgres') => {
    const made = await createStore(dialect);
    places.push(made);
    return made;
  };
  /** Imports `archive` into a new SQLite store and returns the refusal, with the store. */
  const refused = async (archive: string, message: RegExp) => {
    const target = await store('sqlite');
    await assert.rejects(importArchive({ settings: target.settings, from: archive, migrationSets: sets }), (error) => {
      assert.equal((error as Error).name, 'ArchiveError');
      assert.match((error as Error).message, message);
      return true;
    });
    assert.deepEqual(await occupied(target), [], 'the refused import wrote no row');
    return target;
  };
  /** A copy of the good archive, changed by `change(directory)`. */
  const variant = (name: string, change: (directory: string) => void) => {
    const directory = join(work, name);
    cpSync(good, directory, { recursive: true });
    change(directory);
    return directory;
  };
  const editManifest = (directory: string, edit: (m: Record<string, unknown>) => void) => {
    const path = join(directory, 'manifest.json');
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
    edit(parsed);
    writeFileSync(path, JSON.stringify(parsed));
  };

  before(async () => {
    source = await store(testDialect);
    const opened = await openStore(source.settings);
    try {
      await migrateStore(opened, sets);
      const small = await opened.blobs.put(Readable.from([BLOB_SMALL]));
      const large = await opened.blobs.put(Readable.from([BLOB_LARGE]));
      const db = opened.sql.database;
      await db.write(function* () {
        // Three keys, the last deleted: the next key must still be number 4.
        for (const n of [1, 2, 3])
          yield* run(
            'insert into apikeys_keys (key, owner, name, secret_hash, scopes, created_at) values (?, ?, ?, ?, ?, ?)',
            `key-${n}`,
            'user-1',
            `name ${n}`,
            'hash',
            '[]',
            '2026-01-01T00:00:00Z',
          );
        yield* run("delete from apikeys_keys where key = 'key-3'");
        yield* run("update kv_meta set value = cast(? as bigint) where name = 'last_seq'", BIG.toString());
        yield* run('insert into config_objects (id, entries) values (?, ?)', 'text', JSON.stringify({ t: TEXT }));
        yield* run(
          "insert into docdb_databases (id, name, created_at, owners) values ('db-1', 'shop', '2026-01-01T00:00:00Z', '[]')",
        );
        yield* run("insert into docdb_collections (database_id, name) values ('db-1', 'items')");
        yield* run(
          "insert into docdb_indexes (collection_id, name, definition) select id, 'by-x', '{}' from docdb_collections",
        );
        yield* run('insert into docdb_documents (collection_id, body) select id, ? from docdb_collections', TEXT);
        yield* run(
          'insert into docdb_index_entries (index_id, key, seq) select i.id, ?, d.seq from docdb_indexes i, docdb_documents d',
          BYTES,
        );
        yield* run(
          `insert into lambda_invocations (id, lambda_id, owner, started_at, duration_ms, trigger, status, logs, fetches, bindings)
           values ('i-1', 'l-1', 'user-1', '2026-01-01T00:00:00Z', 1.5e300, 'http', 200, '[]', 0, 0)`,
        );
        for (const [holder, blob] of [
          ['files:file-1', small],
          ['files:file-2', large],
        ] as const)
          yield* run('insert into stratus_blob_refs (sha256, holder) values (?, ?)', blob.sha256, holder);
        // An unreferenced blob's pending deletion: neither it nor the blob travels.
        yield* run('insert into stratus_blob_candidates (sha256, due_at) values (?, ?)', sha('gone'), 1);
      });
    } finally {
      await opened.close();
    }
    good = join(work, 'good');
    ({ manifest } = await exportArchive({ settings: source.settings, to: good }));
  });
  after(async () => {
    for (const place of places) await place.cleanup().catch(() => {});
    rmSync(work, { recursive: true, force: true });
  });

  it('encodes what JSON cannot carry with markers, and reads them back', () => {
    for (const value of [null, 'text', 0, -1.5, true, BIG, -BIG, BYTES, Number.NaN, Infinity, -Infinity]) {
      const decoded = decodeValue(JSON.parse(JSON.stringify(encodeValue(value))));
      if (typeof value === 'number' && Number.isNaN(value)) assert.ok(Number.isNaN(decoded));
      else assert.deepEqual(decoded, value);
    }
    assert.deepEqual(encodeValue(2n ** 53n - 1n), 2 ** 53 - 1, 'a safe integer stays a number');
    assert.deepEqual(encodeValue(BIG), { $bigint: BIG.toString() });
    assert.throws(() => decodeValue({ $base64: 'not base64!' }), /not an archived value/);
    assert.throws(() => decodeValue({ other: 1 }), /not an archived value/);
  });

  it('describes the snapshot in its manifest: migrations, counts, checksums, blobs, what was left out', () => {
    assert.equal(manifest.source.dialect, testDialect);
    // Every owner with migrations (the console has none).
    const owners = sets.filter((set) => set.migrations.length > 0).map((set) => set.owner);
    assert.deepEqual(Object.keys(manifest.migrations).sort(), owners.sort());
    const table = (name: string) => manifest.tables.find((t) => t.name === name);
    assert.equal(table('apikeys_keys')?.rows, 2);
    assert.deepEqual(table('apikeys_keys')?.serial, { column: 'seq', next: 4 });
    const file = readFileSync(join(good, 'tables/apikeys_keys.ndjson'));
    assert.equal(table('apikeys_keys')?.sha256, sha(file));
    assert.equal(table('apikeys_keys')?.bytes, file.length);
    assert.deepEqual(manifest.blobs, { count: 2, bytes: BLOB_SMALL.length + BLOB_LARGE.length });
    assert.deepEqual(readFileSync(join(good, blobEntry(sha(BLOB_LARGE)))), BLOB_LARGE);
    for (const name of ['stratus_migrations', 'stratus_blob_candidates', 'stratus_instances', 'lambda_ongoing'])
      assert.ok(manifest.excludedTables.some((t) => t.name === name) && !table(name), name);
    // Parents before children: a load in this order never breaks a foreign key.
    const order = manifest.tables.map((t) => t.name);
    assert.ok(order.indexOf('docdb_databases') < order.indexOf('docdb_collections'));
    assert.ok(order.indexOf('docdb_indexes') < order.indexOf('docdb_index_entries'));
    assert.equal(
      parseManifest(readFileSync(join(good, 'manifest.json'), 'utf8')).tables.length,
      manifest.tables.length,
    );
  });

  for (const dialect of testDialect === 'postgres' ? (['sqlite', 'postgres'] as const) : (['sqlite'] as const)) {
    it(`loads into ${dialect} with every value exact and every counter past the rows`, async () => {
      const target = await store(dialect);
      const summary = await importArchive({ settings: target.settings, from: good, migrationSets: sets });
      assert.equal(
        summary.rows,
        manifest.tables.reduce((sum, t) => sum + t.rows, 0),
      );
      assert.deepEqual(await contents(target), await contents(source));
      assert.ok(await blobExists(target, sha(BLOB_LARGE)));
      assert.ok(await blobExists(target, sha(BLOB_SMALL)));
      const opened = await openStore(target.settings);
      try {
        // Key 3 was deleted at the source: its number is not given out again.
        const [added] = await opened.sql.database.write(() =>
          all<{ seq: number }>(
            "insert into apikeys_keys (key, owner, name, secret_hash, scopes, created_at) values ('key-new', 'u', 'n', 'h', '[]', 'now') returning seq",
          ),
        );
        assert.equal(Number(added?.seq), 4);
      } finally {
        await opened.close();
      }
    });
  }

  it('writes a tar stream to a given output (`--to -`), which imports', async () => {
    const path = join(work, 'stream.tar');
    const stdout = createWriteStream(path);
    const { where } = await exportArchive({ settings: source.settings, to: '-', stdout });
    await new Promise((resolve) => stdout.end(resolve));
    assert.equal(where, '-');
    const listed = execFileSync('tar', ['tf', path], { encoding: 'utf8' }).split('\n');
    assert.equal(listed[0], 'manifest.json');
    assert.ok(listed.includes(blobEntry(sha(BLOB_LARGE))));
    const target = await store('sqlite');
    await importArchive({ settings: target.settings, from: path, migrationSets: sets });
    assert.deepEqual(await contents(target), await contents(source));
  });

  it("reads a tar file that the system's tar made of a directory archive, and refuses a cut one", async () => {
    const tar = join(work, 'retarred.tar');
    execFileSync('tar', ['cf', tar, '-C', good, '.']);
    const target = await store('sqlite');
    await importArchive({ settings: target.settings, from: tar, migrationSets: sets });
    assert.deepEqual(await contents(target), await contents(source));
    const cut = join(work, 'cut.tar');
    writeFileSync(cut, readFileSync(tar).subarray(0, 20_000));
    await refused(cut, /cut\.tar is not a readable tar archive: the tar file ends/);
  });

  it('refuses a changed byte in a table file, naming the file', async () => {
    const archive = variant('changed-table', (directory) => {
      const path = join(directory, 'tables/config_objects.ndjson');
      const bytes = readFileSync(path);
      bytes[bytes.indexOf('text')] = 'T'.charCodeAt(0);
      writeFileSync(path, bytes);
    });
    await refused(archive, /tables\/config_objects\.ndjson is damaged: its SHA-256 is [0-9a-f]{64}, the manifest says/);
  });

  it('refuses a changed byte in a blob', async () => {
    const archive = variant('changed-blob', (directory) => {
      const path = join(directory, blobEntry(sha(BLOB_LARGE)));
      const bytes = readFileSync(path);
      bytes[1000] = 8;
      writeFileSync(path, bytes);
    });
    await refused(archive, new RegExp(`${blobEntry(sha(BLOB_LARGE))} is damaged: its content hashes to`));
  });

  it('refuses a missing table file and a missing blob', async () => {
    await refused(
      variant('missing-table', (directory) => unlinkSync(join(directory, 'tables/docdb_documents.ndjson'))),
      /the archive is missing tables\/docdb_documents\.ndjson/,
    );
    await refused(
      variant('missing-blob', (directory) => unlinkSync(join(directory, blobEntry(sha(BLOB_SMALL))))),
      new RegExp(`the archive is missing ${blobEntry(sha(BLOB_SMALL))}, a blob that stratus_blob_refs references`),
    );
    await refused(
      variant('no-manifest', (directory) => unlinkSync(join(directory, 'manifest.json'))),
      /has no manifest\.json/,
    );
  });

  it('refuses a wrong row count and wrong blob totals', async () => {
    await refused(
      variant('wrong-count', (directory) =>
        editManifest(directory, (m) => {
          const tables = m.tables as { name: string; rows: number }[];
          tables.find((t) => t.name === 'apikeys_keys')!.rows = 3;
        }),
      ),
      /tables\/apikeys_keys\.ndjson holds 2 rows; the manifest says 3/,
    );
    await refused(
      variant('wrong-blobs', (directory) =>
        editManifest(directory, (m) => void ((m.blobs as { count: number }).count = 3)),
      ),
      /the archive holds 2 blobs of \d+ bytes; the manifest says 3/,
    );
  });

  it("refuses an archive whose migrations are not this build's", async () => {
    const archive = variant('other-schema', (directory) =>
      editManifest(directory, (m) => {
        const migrations = m.migrations as Record<string, string[]>;
        migrations.docdb = [...migrations.docdb!, '002_from_the_future'];
        delete migrations.kv;
        migrations.kv = ['001_kv_node'];
        migrations.weather = ['001_clouds'];
      }),
    );
    await refused(
      archive,
      /schema differs from this build's[^]*docdb: the archive has 002_from_the_future, unknown to this build[^]*weather: not part of this build/,
    );
  });

  it('refuses a non-empty store, and takes one that was only migrated', async () => {
    const target = await store('sqlite');
    await importArchive({ settings: target.settings, from: good, migrationSets: sets });
    await assert.rejects(importArchive({ settings: target.settings, from: good, migrationSets: sets }), {
      name: 'ArchiveError',
      message:
        /the target store is not empty: apikeys_keys \(2 rows\), .*config_objects \(1 row\).*Import into a new store/,
    });
    // `stratus migrate` inserts kv_meta's and kv_follower's rows: still an empty store.
    const migrated = await store('sqlite');
    const opened = await openStore(migrated.settings);
    await migrateStore(opened, sets);
    await opened.close();
    await importArchive({ settings: migrated.settings, from: good, migrationSets: sets });
    assert.deepEqual(await contents(migrated), await contents(source));
  });

  it('rolls a load that fails halfway back, and removes the blobs it put', async () => {
    // Verified (its manifest says so) but not loadable: a row repeated breaks config_objects' unique id.
    const archive = variant('unloadable', (directory) => {
      const path = join(directory, 'tables/config_objects.ndjson');
      const line = readFileSync(path, 'utf8');
      writeFileSync(path, line + line);
      editManifest(directory, (m) => {
        const table = (m.tables as { name: string; rows: number; bytes: number; sha256: string }[]).find(
          (t) => t.name === 'config_objects',
        )!;
        table.rows = 2;
        table.bytes = Buffer.byteLength(line + line);
        table.sha256 = sha(line + line);
      });
    });
    const target = await refused(archive, /loading config_objects failed/);
    assert.equal(await blobExists(target, sha(BLOB_LARGE)), false);
    assert.equal(await blobExists(target, sha(BLOB_SMALL)), false);
    // What stays is the schema, which the next import takes as empty.
    await importArchive({ settings: target.settings, from: good, migrationSets: sets });
    assert.deepEqual(await contents(target), await contents(source));
  });
});
