import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import type pg from 'pg';
import { createDirectoryBlobStore } from '../../src/store/blob/directory.ts';
import { withInlineSmallBlobs } from '../../src/store/blob/inline.ts';
import { blobMigrations } from '../../src/store/blob/migrations.ts';
import { createPostgresBlobStore } from '../../src/store/blob/postgres.ts';
import { BlobTooLargeError } from '../../src/store/blob/types.ts';
import type { SqlConnection } from '../../src/store/db.ts';
import { migrate } from '../../src/store/migrate.ts';
import { first } from '../../src/store/sql-work.ts';
import { createTestDatabase, testDialect } from '../helpers/database.ts';
import { pieces, readAll, runBlobStoreContract, sha256Of } from './blob-contract.ts';

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'stratus-blob-'));
}

/** Every file under `dir`, relative, recursively. */
function listFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name).slice(dir.length + 1))
    .sort();
}

runBlobStoreContract('directory', async () => {
  const dir = tempDir();
  return {
    store: createDirectoryBlobStore(join(dir, 'blobs')),
    async cleanup() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

// Small blobs in SQLite, large ones in the directory: the contract at a 4 KiB boundary, so both
// halves (and blobs that cross it) are exercised.
runBlobStoreContract('directory with inline small blobs', async () => {
  const dir = tempDir();
  const store = withInlineSmallBlobs(createDirectoryBlobStore(join(dir, 'blobs')), join(dir, 'small.db'), {
    maxInlineBytes: 4096,
  });
  return {
    store,
    async cleanup() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe('inline small blobs', () => {
  it('keep small blobs out of the directory, large ones in it, and survive a reopen', async () => {
    const dir = tempDir();
    try {
      let store = withInlineSmallBlobs(createDirectoryBlobStore(join(dir, 'blobs')), join(dir, 'small.db'), {
        maxInlineBytes: 4096,
      });
      const small = randomBytes(4096);
      const large = randomBytes(4097);
      const smallInfo = await store.put(pieces(small, 1000));
      const largeInfo = await store.put(pieces(large, 1000));
      assert.equal(
        existsSync(join(dir, 'blobs', smallInfo.sha256.slice(0, 2), smallInfo.sha256.slice(2, 4), smallInfo.sha256)),
        false,
        'a small blob is no file',
      );
      assert.equal(
        existsSync(join(dir, 'blobs', largeInfo.sha256.slice(0, 2), largeInfo.sha256.slice(2, 4), largeInfo.sha256)),
        true,
        'a large blob is a file',
      );
      await store.close();
      store = withInlineSmallBlobs(createDirectoryBlobStore(join(dir, 'blobs')), join(dir, 'small.db'), {
        maxInlineBytes: 4096,
      });
      assert.ok((await readAll((await store.get(smallInfo.sha256))!)).bytes.equals(small));
      assert.ok(
        (await readAll((await store.get(largeInfo.sha256, { start: 4000, end: 5000 }))!)).bytes.equals(
          large.subarray(4000),
        ),
      );
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('directory blob store', () => {
  let root: string;
  before(() => {
    root = tempDir();
  });
  after(() => {
    rmSync(root, { recursive: true, force: true });
  });

  it('writes the content to <dir>/<aa>/<bb>/<sha256>, creating the directory', async () => {
    const dir = join(root, 'layout', 'nested');
    const store = createDirectoryBlobStore(dir);
    const content = randomBytes(4096);
    const { sha256 } = await store.put(pieces(content));
    const path = join(dir, sha256.slice(0, 2), sha256.slice(2, 4), sha256);
    assert.ok(readFileSync(path).equals(content));
    assert.deepEqual(listFiles(dir), [join(sha256.slice(0, 2), sha256.slice(2, 4), sha256)]);
  });

  it('keeps the existing file when the same content is put again', async () => {
    const dir = join(root, 'dedupe');
    const store = createDirectoryBlobStore(dir);
    const content = randomBytes(1000);
    const { sha256 } = await store.put(pieces(content));
    const path = join(dir, sha256.slice(0, 2), sha256.slice(2, 4), sha256);
    const before = statSync(path);
    await store.put(pieces(content));
    const afterPut = statSync(path);
    assert.equal(afterPut.ino, before.ino);
    assert.equal(afterPut.mtimeMs, before.mtimeMs);
    assert.deepEqual(listFiles(dir), [join(sha256.slice(0, 2), sha256.slice(2, 4), sha256)]);
  });

  it('leaves no temp files after a failed, oversized, mismatched or aborted put', async () => {
    const dir = join(root, 'failures');
    const store = createDirectoryBlobStore(dir);
    const content = randomBytes(300_000);
    await assert.rejects(store.put(pieces(content), { maxBytes: 1000 }), BlobTooLargeError);
    await assert.rejects(store.put(pieces(content), { expectedSha256: sha256Of(Buffer.from('other')) }));
    async function* failing() {
      yield content;
      throw new Error('boom');
    }
    await assert.rejects(store.put(failing()), /boom/);
    const controller = new AbortController();
    const source = new PassThrough();
    source.write(content);
    const put = store.put(source, { signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    await assert.rejects(put, { name: 'AbortError' });
    assert.deepEqual(listFiles(dir), []);
  });

  it('never resolves a path from a malformed hash', async () => {
    const dir = join(root, 'traversal');
    const store = createDirectoryBlobStore(join(dir, 'blobs'));
    mkdirSync(dir, { recursive: true });
    const victim = join(dir, 'victim');
    writeFileSync(victim, 'keep me');
    // A file where a case-insensitive or unvalidated lookup would find it.
    const upper = sha256Of(Buffer.from('x')).toUpperCase();
    mkdirSync(join(dir, 'blobs', upper.slice(0, 2), upper.slice(2, 4)), { recursive: true });
    writeFileSync(join(dir, 'blobs', upper.slice(0, 2), upper.slice(2, 4), upper), 'not a blob');
    assert.equal(await store.stat(upper), null);
    assert.equal(await store.get(upper), null);
    assert.equal(await store.delete(upper), false);
    assert.equal(await store.delete('../victim'), false);
    assert.equal(await store.stat('../victim'), null);
    assert.ok(existsSync(victim));
    assert.ok(existsSync(join(dir, 'blobs', upper.slice(0, 2), upper.slice(2, 4), upper)));
  });

  it('keeps serving an open read after the blob is deleted', async () => {
    const store = createDirectoryBlobStore(join(root, 'open-delete'));
    const content = randomBytes(200_000);
    const { sha256 } = await store.put(pieces(content));
    const stream = await store.get(sha256);
    assert.ok(stream);
    assert.equal(await store.delete(sha256), true);
    assert.ok((await readAll(stream)).bytes.equals(content));
  });
});

describe('blob migrations', () => {
  it(`apply once on ${testDialect} and create the blob tables`, async () => {
    const database = await createTestDatabase();
    const connection = await database.connect();
    try {
      assert.deepEqual(await migrate(connection.database, [blobMigrations]), [
        'store/blob_001_tables',
        'store/blob_002_refs',
        'store/blob_003_doomed',
      ]);
      assert.deepEqual(await migrate(connection.database, [blobMigrations]), []);
      for (const table of ['stratus_blobs', 'stratus_blob_chunks', 'stratus_blob_uploads', 'stratus_blob_doomed']) {
        const row = await connection.database.read(() => first<{ n: number }>(`select count(*) as n from ${table}`));
        assert.equal(Number(row?.n), 0, table);
      }
    } finally {
      await connection.close();
      await database.cleanup();
    }
  });
});

if (testDialect === 'postgres') {
  /** A fresh schema with the blob tables, and a store over its pool. */
  const openStore = async (options?: { chunkSize?: number; readBatch?: number }) => {
    const database = await createTestDatabase();
    const connection = await database.connect();
    await migrate(connection.database, [blobMigrations]);
    assert.ok(connection.pool);
    return {
      connection,
      pool: connection.pool,
      store: createPostgresBlobStore(connection.pool, options),
      async cleanup() {
        await connection.close();
        await database.cleanup();
      },
    };
  };

  runBlobStoreContract('postgres', async () => openStore());
  runBlobStoreContract(
    'postgres, 64 KiB chunks read 3 at a time',
    async () => openStore({ chunkSize: 64 * 1024, readBatch: 3 }),
    {
      chunkSize: 64 * 1024,
    },
  );

  describe('postgres blob store', () => {
    let opened: Awaited<ReturnType<typeof openStore>>;
    let pool: pg.Pool;
    let connection: SqlConnection;
    before(async () => {
      opened = await openStore({ chunkSize: 1000 });
      ({ pool, connection } = opened);
    });
    after(async () => {
      await opened.cleanup();
    });

    const count = async (query: string, params: unknown[] = []) =>
      Number((await pool.query<{ n: string | number }>(query, params)).rows[0]?.n);

    it('stores content as fixed-size chunks keyed by hash', async () => {
      const content = randomBytes(4500);
      const { sha256 } = await opened.store.put(pieces(content, 333));
      const rows = (
        await pool.query<{ seq: number; data: Buffer }>(
          'select seq, data from stratus_blob_chunks where sha256 = $1 order by seq',
          [sha256],
        )
      ).rows;
      assert.deepEqual(
        rows.map((row) => [row.seq, row.data.length]),
        [
          [0, 1000],
          [1, 1000],
          [2, 1000],
          [3, 1000],
          [4, 500],
        ],
      );
      assert.ok(Buffer.concat(rows.map((row) => row.data)).equals(content));
      const blob = (
        await pool.query<{ size: number; chunk_size: number }>(
          'select size, chunk_size from stratus_blobs where sha256 = $1',
          [sha256],
        )
      ).rows[0];
      assert.deepEqual(blob, { size: 4500, chunk_size: 1000 });
    });

    it('stores and reads a blob that fits in one chunk (and an empty one) with one statement, deduplicated', async () => {
      const statements: string[] = [];
      const counting = new Proxy(pool, {
        get(target, property, receiver) {
          if (property !== 'query') return Reflect.get(target, property, receiver) as unknown;
          return (text: string, params?: unknown[]) => {
            statements.push(text);
            return target.query(text, params);
          };
        },
      });
      const store = createPostgresBlobStore(counting, { chunkSize: 1000 });
      await store.put(pieces(randomBytes(10))); // the first put also sweeps abandoned uploads
      for (const content of [randomBytes(999), Buffer.alloc(0)]) {
        statements.length = 0;
        const [first, again] = await Promise.all([store.put(pieces(content, 100)), store.put(pieces(content, 7))]);
        assert.deepEqual(first, { sha256: sha256Of(content), size: content.length });
        assert.deepEqual(again, first);
        assert.equal(statements.length, 2, statements.join('\n'));
        assert.equal(
          await count('select count(*) as n from stratus_blob_chunks where sha256 = $1', [first.sha256]),
          content.length === 0 ? 0 : 1,
        );
        statements.length = 0;
        const stream = await store.get(first.sha256);
        assert.ok(stream && (await readAll(stream)).bytes.equals(content));
        assert.equal(statements.length, 1, 'a one-chunk blob is read with one statement');
        if (content.length > 0) {
          const part = await store.get(first.sha256, { start: 3, end: 500 });
          assert.ok(part && (await readAll(part)).bytes.equals(content.subarray(3, 501)));
        }
      }
      assert.equal(await count('select count(*) as n from stratus_blob_uploads'), 0);
    });

    it('reads blobs written with another chunk size', async () => {
      const content = randomBytes(10_000);
      const { sha256 } = await createPostgresBlobStore(pool, { chunkSize: 3000 }).put(pieces(content));
      const stream = await opened.store.get(sha256, { start: 2990, end: 6010 });
      assert.ok(stream);
      assert.ok((await readAll(stream)).bytes.equals(content.subarray(2990, 6011)));
    });

    it('leaves no upload rows or temp chunks after success, dedupe or failure', async () => {
      const content = randomBytes(5000);
      await opened.store.put(pieces(content));
      await Promise.all([opened.store.put(pieces(content)), opened.store.put(pieces(content, 100))]);
      await assert.rejects(opened.store.put(pieces(randomBytes(5000)), { maxBytes: 2500 }), BlobTooLargeError);
      await assert.rejects(opened.store.put(pieces(randomBytes(5000)), { expectedSha256: sha256Of(content) }));
      const controller = new AbortController();
      const source = new PassThrough();
      source.write(randomBytes(3500));
      const put = opened.store.put(source, { signal: controller.signal });
      setTimeout(() => controller.abort(), 30);
      await assert.rejects(put, { name: 'AbortError' });
      assert.equal(await count('select count(*) as n from stratus_blob_uploads'), 0);
      assert.equal(await count(`select count(*) as n from stratus_blob_chunks where sha256 like 'upload:%'`), 0);
      assert.equal(
        await count('select count(*) as n from stratus_blob_chunks where sha256 = $1', [sha256Of(content)]),
        5,
      );
      // Every chunk belongs to a blob.
      assert.equal(
        await count(
          'select count(*) as n from stratus_blob_chunks c where not exists (select 1 from stratus_blobs b where b.sha256 = c.sha256)',
        ),
        0,
      );
    });

    it('sweeps chunks of uploads abandoned long ago', async () => {
      const id = 'crashed-upload';
      await pool.query('insert into stratus_blob_uploads (id, created_at) values ($1, $2)', [
        id,
        '2000-01-01T00:00:00.000Z',
      ]);
      await pool.query('insert into stratus_blob_chunks (sha256, seq, data) values ($1, 0, $2)', [
        `upload:${id}`,
        Buffer.from('partial'),
      ]);
      // The sweep runs once per store, before its first upload.
      await createPostgresBlobStore(pool).put(pieces(randomBytes(10)));
      assert.equal(await count('select count(*) as n from stratus_blob_uploads where id = $1', [id]), 0);
      assert.equal(await count('select count(*) as n from stratus_blob_chunks where sha256 = $1', [`upload:${id}`]), 0);
    });

    it('delete removes the chunks with the blob', async () => {
      const content = randomBytes(2500);
      const { sha256 } = await opened.store.put(pieces(content));
      assert.equal(await opened.store.delete(sha256), true);
      assert.equal(await count('select count(*) as n from stratus_blob_chunks where sha256 = $1', [sha256]), 0);
      assert.equal(connection.dialect, 'postgres');
    });
  });
}
