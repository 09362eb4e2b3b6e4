import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from '../../packages/client/src/index.ts';
import { buildMigrationSets } from '../../src/archive-cli.ts';
import { exportArchive } from '../../src/store/archive/export.ts';
import { importArchive } from '../../src/store/archive/import.ts';
import { testDialect } from '../helpers/database.ts';
import { serve } from '../helpers/serve.ts';
import { createStore, type FreshStore } from '../helpers/stores.ts';

const EMAIL = 'writer@example.com';
const PASSWORD = 'a long enough passphrase';

type Row = Record<string, unknown>;

function tableRows(archive: string, table: string): Row[] {
  return readFileSync(join(archive, 'tables', `${table}.ndjson`), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Row);
}

const sum = (rows: Row[], column: string) => rows.reduce((total, row) => total + Number(row[column]), 0);

describe('stratus export of a platform serving writes', () => {
  const places: FreshStore[] = [];
  const archives = mkdtempSync(join(tmpdir(), 'stratus-live-'));
  after(async () => {
    for (const place of places) await place.cleanup().catch(() => {});
    rmSync(archives, { recursive: true, force: true });
  });

  it('takes one snapshot: the archive imports, and counters kept beside the rows agree with them', async () => {
    const source = await createStore(testDialect);
    places.push(source);
    const server = await serve([], { ...source.env, ADMIN_EMAIL: EMAIL, ADMIN_PASSWORD: PASSWORD });
    try {
      const client = createClient({ url: `http://127.0.0.1:${server.publicPort}` });
      await client.auth.login(EMAIL, PASSWORD);
      const database = await client.docdb.databases.create('live');
      const items = client.docdb.database(database.id).collection('items');
      await items.createIndex({ name: 'by-n', type: 'btree', fields: ['n'] });
      const logger = client.logs.logger((await client.logs.loggers.create({ name: 'live' })).id);
      const bucket = client.files.bucket((await client.files.buckets.create({ name: 'live' })).id);
      await client.kv.createCollection('live');
      const keys = client.kv.collection('live');

      // Each loop writes through one service until told to stop; every write is a transaction
      // that moves rows and the counters beside them together.
      let stop = false;
      let writes = 0;
      const loop = async (write: (i: number) => Promise<unknown>) => {
        for (let i = 0; !stop; i++) {
          await write(i);
          writes++;
        }
      };
      const loops = [
        loop((i) => items.insert(Array.from({ length: 5 }, (_, k) => ({ n: i * 5 + k })))),
        loop((i) => (i % 4 === 3 ? items.remove({ n: { $lt: i } }) : items.insert([{ n: -i }]))),
        loop((i) => logger.ingest([`line ${i}`, `another line ${i}`])),
        // Replacing a file drops its old blob's reference (the blob becomes a deletion candidate).
        loop((i) => bucket.upload(i % 2 === 0 ? 'hot.txt' : `cold-${i}.txt`, `content ${i} ${'x'.repeat(i % 50)}`)),
        loop((i) => keys.set(`key-${i % 20}`, i)),
      ];
      const failed = Promise.all(loops).then(
        () => undefined,
        (error: unknown) => error,
      );
      const deadline = Date.now() + 30_000;
      while (writes < 100) {
        assert.ok(Date.now() < deadline, `only ${writes} writes in 30 s`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }

      const before = writes;
      const archive = join(archives, 'live');
      const { manifest } = await exportArchive({ settings: source.settings, to: archive });
      const during = writes - before;
      stop = true;
      assert.equal(await failed, undefined, 'every write succeeded');
      assert.ok(during > 0, 'writes went on during the export');

      const target = await createStore('sqlite');
      places.push(target);
      const imported = await importArchive({
        settings: target.settings,
        from: archive,
        migrationSets: buildMigrationSets(),
      });
      assert.equal(
        imported.rows,
        manifest.tables.reduce((total, table) => total + table.rows, 0),
      );

      // docdb keeps each collection's document count in its row, in the same transaction.
      const collections = tableRows(archive, 'docdb_collections');
      const documents = tableRows(archive, 'docdb_documents');
      assert.ok(documents.length > 0);
      for (const collection of collections)
        assert.equal(
          collection.document_count,
          documents.filter((document) => document.collection_id === collection.id).length,
          'document_count',
        );
      // Every document has its index entry, and no entry names a document that is not there.
      const seqs = new Set(documents.map((document) => document.seq));
      const entries = tableRows(archive, 'docdb_index_entries');
      assert.equal(entries.length, documents.length);
      assert.ok(entries.every((entry) => seqs.has(entry.seq)));
      // logs keeps each logger's retained totals beside its chunks.
      const chunks = tableRows(archive, 'logs_chunks');
      for (const row of tableRows(archive, 'logs_loggers')) {
        const own = chunks.filter((chunk) => chunk.logger_id === row.id);
        assert.equal(row.retained_bytes, sum(own, 'bytes'), 'retained_bytes');
        assert.equal(row.raw_lines, sum(own, 'lines'), 'raw_lines');
      }
      // Every file's content is referenced, and every referenced blob is in the archive.
      const refs = new Set(tableRows(archive, 'stratus_blob_refs').map((ref) => `${ref.holder} ${ref.sha256}`));
      const files = tableRows(archive, 'files_files');
      for (const file of files) assert.ok(refs.has(`files:${file.id} ${file.hash_sha256}`), String(file.name));
      assert.equal(manifest.blobs.count, new Set(files.map((file) => file.hash_sha256)).size);
      // The key-value node's counters agree with its keys and its log.
      const meta = new Map(tableRows(archive, 'kv_meta').map((row) => [row.name, row.value]));
      assert.equal(meta.get('last_seq'), Math.max(...tableRows(archive, 'kv_keys').map((key) => Number(key.seq))));
      assert.equal(meta.get('last_log_id'), Math.max(...tableRows(archive, 'kv_log').map((entry) => Number(entry.id))));
    } finally {
      await server.stop();
    }
  });
});
