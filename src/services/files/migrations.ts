import type { MigrationSet } from '../../store/migrate.ts';

/**
 * File-bucket tables. `seq` gives creation order (bucket listing, and file listing by first
 * upload: a replacement updates the row in place). Timestamps are nanosecond integers above 2^53,
 * stored as decimal text so that neither driver rounds them. `owner` is the creator, the one
 * owner a bucket has while PATCH is not implemented; `owners` keeps the JSON array the API shows.
 * Content lives in the blob store; `hash_sha256` names the blob, referenced as `files:<id>`.
 */
export const filesMigrations: MigrationSet = {
  owner: 'files',
  migrations: [
    {
      name: '001_files',
      statements: ({ types }) => [
        `create table files_buckets (
          seq ${types.serialPrimaryKey}, id text not null unique, owner text not null, owners text not null,
          project_id text not null, name text not null, description text not null, created_ns text not null)`,
        `create unique index files_buckets_owner_name on files_buckets (owner, name)`,
        `create table files_files (
          seq ${types.serialPrimaryKey}, id text not null unique, uuid text not null,
          bucket_id text not null references files_buckets (id) on delete cascade,
          name text not null, owners text not null, created_ns text not null, updated_ns text not null,
          size bigint not null, hash_md5 text not null, hash_sha256 text not null, mime_type text not null)`,
        `create unique index files_files_bucket_name on files_files (bucket_id, name)`,
        `create index files_files_bucket_seq on files_files (bucket_id, seq)`,
      ],
    },
  ],
};
