import { sql } from 'kysely';
import { columnTypes, type MigrationSet } from '../migrate.ts';

/**
 * Tables of the PostgreSQL blob store. They are created on SQLite too (one migration set serves
 * both databases), where they stay empty: embedded mode keeps blobs in a directory.
 *
 * - `stratus_blobs`: one row per complete blob; a blob exists exactly when its row does.
 * - `stratus_blob_chunks`: the content in fixed-size pieces, keyed by blob hash (or by an upload's
 *   temporary key while it is being written).
 * - `stratus_blob_uploads`: uploads in progress, so chunks orphaned by a crash can be swept.
 */
export const blobMigrations: MigrationSet = {
  owner: 'store',
  migrations: [
    {
      name: 'blob_001_tables',
      async up(db, dialect) {
        const t = columnTypes(dialect);
        await db.schema
          .createTable('stratus_blobs')
          .addColumn('sha256', 'text', (c) => c.primaryKey())
          .addColumn('size', t.bigint, (c) => c.notNull())
          .addColumn('chunk_size', 'integer', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('stratus_blob_chunks')
          .addColumn('sha256', 'text', (c) => c.notNull())
          .addColumn('seq', 'integer', (c) => c.notNull())
          .addColumn('data', t.blob, (c) => c.notNull())
          .addPrimaryKeyConstraint('stratus_blob_chunks_pk', ['sha256', 'seq'])
          .execute();
        await db.schema
          .createTable('stratus_blob_uploads')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .execute();
        if (dialect === 'postgres') {
          // Blob content is mostly already compressed (images, archives, image layers): skip
          // PostgreSQL's attempt to compress every chunk and store it out of line as is.
          await sql`alter table stratus_blob_chunks alter column data set storage external`.execute(db);
        }
      },
    },
    {
      // Reference tracking shared by every service that keeps blobs (see refs.ts): a blob is kept
      // while a reference names it; `stratus_blob_candidates` lists blobs that lost a reference
      // (or were put for a write that may never commit) and are deleted by the sweeper once due
      // and unreferenced. Candidates are rows, not a set: each loss adds its own row with its own
      // due time, so a sweeper pass never erases a newer grace period it did not read.
      name: 'blob_002_refs',
      async up(db, dialect) {
        const t = columnTypes(dialect);
        await db.schema
          .createTable('stratus_blob_refs')
          .addColumn('sha256', 'text', (c) => c.notNull())
          .addColumn('holder', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('stratus_blob_refs_pk', ['sha256', 'holder'])
          .execute();
        await db.schema.createIndex('stratus_blob_refs_holder').on('stratus_blob_refs').column('holder').execute();
        await sql`create table stratus_blob_candidates (
          id ${sql.raw(t.serialPrimaryKey)}, sha256 text not null, due_at ${sql.raw(t.bigint)} not null)`.execute(db);
        await db.schema.createIndex('stratus_blob_candidates_due').on('stratus_blob_candidates').columns(['due_at', 'id']).execute();
        await db.schema.createIndex('stratus_blob_candidates_sha').on('stratus_blob_candidates').columns(['sha256', 'due_at']).execute();
      },
    },
  ],
};
