import type { MigrationSet } from '../migrate.ts';

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
      statements: ({ types, binaryStoredAsIs }) => [
        `create table stratus_blobs (sha256 text primary key, size ${types.bigint} not null, chunk_size integer not null, created_at text not null)`,
        `create table stratus_blob_chunks (sha256 text not null, seq integer not null, data ${types.blob} not null, constraint stratus_blob_chunks_pk primary key (sha256, seq))`,
        'create table stratus_blob_uploads (id text primary key, created_at text not null)',
        // Blob content is mostly already compressed (images, archives, image layers): PostgreSQL
        // stores each chunk as it is instead of trying to compress it.
        ...binaryStoredAsIs('stratus_blob_chunks', 'data'),
      ],
    },
    {
      // Reference tracking shared by every service that keeps blobs (see refs.ts): a blob is kept
      // while a reference names it; `stratus_blob_candidates` lists blobs that lost a reference
      // (or were put for a write that may never commit) and are deleted by the sweeper once due
      // and unreferenced. Candidates are rows, not a set: each loss adds its own row with its own
      // due time, so a sweeper pass never erases a newer grace period it did not read.
      name: 'blob_002_refs',
      statements: ({ types }) => [
        'create table stratus_blob_refs (sha256 text not null, holder text not null, constraint stratus_blob_refs_pk primary key (sha256, holder))',
        'create index stratus_blob_refs_holder on stratus_blob_refs (holder)',
        `create table stratus_blob_candidates (id ${types.serialPrimaryKey}, sha256 text not null, due_at ${types.bigint} not null)`,
        'create index stratus_blob_candidates_due on stratus_blob_candidates (due_at, id)',
        'create index stratus_blob_candidates_sha on stratus_blob_candidates (sha256, due_at)',
      ],
    },
    {
      // Tombstones of blobs being deleted (see refs.ts): a sweeper records the hash in a write,
      // deletes the blob outside any transaction, then removes the row. While the row exists no
      // pin or reference of that hash is taken; a row left by a crash is finished by a later sweep.
      name: 'blob_003_doomed',
      statements: ({ types }) => [
        `create table stratus_blob_doomed (sha256 text primary key, since_ms ${types.bigint} not null)`,
      ],
    },
  ],
};
