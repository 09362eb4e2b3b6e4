import type { MigrationSet } from '../../store/migrate.ts';

/**
 * The node's tables, in the platform's database (the SQLite file, or PostgreSQL shared by every
 * instance). A deleted key keeps its row with `value` null, so its version continues (README: Data
 * model). `kv_log` is the replication log children resume from; its ids are assigned from
 * `kv_meta.last_log_id` under that row's lock, so they commit in order and without gaps, and a gap a
 * reader sees means trimmed (or replaced) entries. `kv_follower` is the lease that lets one instance
 * at a time follow the parent when several serve the same replica node.
 */
export const kvMigrations: MigrationSet = {
  owner: 'kv',
  migrations: [
    {
      name: '001_kv_node',
      statements: ({ types }) => [
        `create table kv_collections (ord ${types.serialPrimaryKey}, project ${types.codePointText} not null, name ${types.codePointText} not null, mark bigint not null default 0, unique (project, name))`,
        `create table kv_keys (project ${types.codePointText} not null, collection ${types.codePointText} not null, key ${types.codePointText} not null, value text, version bigint not null, seq bigint not null, updated_at bigint not null, mark bigint not null default 0, primary key (project, collection, key))${types.withoutRowid}`,
        'create table kv_log (id bigint primary key, seq bigint, line text not null)',
        'create index kv_log_seq on kv_log (seq) where seq is not null',
        'create table kv_meta (name text primary key, value bigint not null)',
        `insert into kv_meta (name, value) values ('last_seq', 0), ('last_log_id', 0), ('log_floor', 0), ('log_floor_id', 0), ('has_baseline', 0), ('baseline_mark', 0)`,
        'create table kv_follower (id integer primary key, holder text not null, expires_at bigint not null, connected integer not null, ready integer not null)',
        "insert into kv_follower (id, holder, expires_at, connected, ready) values (1, '', 0, 0, 0)",
      ],
    },
  ],
};
