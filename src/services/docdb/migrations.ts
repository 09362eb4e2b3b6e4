import type { MigrationSet } from '../../store/migrate.ts';

/**
 * Document database tables. Documents keep their JSON text as stored (key order, exact big
 * integers); `seq` is global and gives insertion order. Index entries hold an order-preserving
 * binary key (query/order.ts `encodeKey`), so one byte-wise `order by key` serves map lookups and
 * btree ranges on both databases; unique indexes keep their entries in a table whose primary key
 * is the key itself, so the database enforces uniqueness across instances too. Deleting a
 * database or collection cascades to everything under it.
 */
export const docdbMigrations: MigrationSet = {
  owner: 'docdb',
  migrations: [
    {
      name: '001_docdb',
      statements: ({ types }) => [
        `create table docdb_databases (
          seq ${types.serialPrimaryKey}, id text not null unique, name text not null, created_at text not null,
          owners text not null)`,
        `create table docdb_api_keys (
          seq ${types.serialPrimaryKey}, key text not null unique,
          database_id text not null references docdb_databases (id) on delete cascade,
          name text not null, secret_hash text not null, created_at text not null)`,
        `create index docdb_api_keys_database on docdb_api_keys (database_id)`,
        `create table docdb_collections (
          id ${types.serialPrimaryKey}, database_id text not null references docdb_databases (id) on delete cascade,
          name text not null, defaults text, auto_counter bigint not null default 0,
          document_count bigint not null default 0, document_bytes bigint not null default 0,
          unique (database_id, name))`,
        `create table docdb_indexes (
          id ${types.serialPrimaryKey}, collection_id bigint not null references docdb_collections (id) on delete cascade,
          name text not null, definition text not null, unique (collection_id, name))`,
        `create table docdb_documents (
          seq ${types.serialPrimaryKey}, collection_id bigint not null references docdb_collections (id) on delete cascade,
          body text not null)`,
        `create index docdb_documents_collection on docdb_documents (collection_id, seq)`,
        `create table docdb_index_entries (
          index_id bigint not null references docdb_indexes (id) on delete cascade,
          key ${types.blob} not null, seq bigint not null, primary key (index_id, key, seq))${types.withoutRowid}`,
        `create table docdb_unique_entries (
          index_id bigint not null references docdb_indexes (id) on delete cascade,
          key ${types.blob} not null, seq bigint not null, primary key (index_id, key))${types.withoutRowid}`,
        // Removing a document deletes its entries by seq.
        `create index docdb_index_entries_seq on docdb_index_entries (seq)`,
        `create index docdb_unique_entries_seq on docdb_unique_entries (seq)`,
      ],
    },
  ],
};
