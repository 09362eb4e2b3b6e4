import type { MigrationSet } from '../../store/migrate.ts';

/**
 * Logging tables. Loggers and their keys mirror docdb's databases (owners as a JSON text array).
 * Ingested data lives in `logs_chunks`: one row per ingest request holding its lines as one blob,
 * so a burst of ingests is a burst of appends (one fsync per group commit on SQLite) and the data
 * lives in the database on PostgreSQL, where any instance can serve any logger. `id` is global and
 * gives ingest order; retention deletes a logger's lowest ids first (the index carries `bytes` so
 * the retention sums never read the blobs).
 */
export const logsMigrations: MigrationSet = {
  owner: 'logs',
  migrations: [
    {
      name: '001_logs',
      statements: ({ types }) => [
        `create table logs_loggers (
          seq ${types.serialPrimaryKey}, id text not null unique, name text not null, created_at text not null,
          owners text not null)`,
        `create table logs_api_keys (
          seq ${types.serialPrimaryKey}, id text not null unique, key text not null unique,
          logger_id text not null references logs_loggers (id) on delete cascade,
          name text not null, secret_hash text not null, created_at text not null)`,
        `create index logs_api_keys_logger on logs_api_keys (logger_id)`,
        `create table logs_chunks (
          id ${types.serialPrimaryKey}, logger_id text not null references logs_loggers (id) on delete cascade,
          kind text not null, data ${types.blob} not null, bytes bigint not null, lines bigint not null)`,
        `create index logs_chunks_logger on logs_chunks (logger_id, id, bytes)`,
      ],
    },
    {
      // Running totals of what each logger retains, kept by every append and retention cut, so
      // neither an append nor a logger read sums its chunks (10M small ingests are 10M rows).
      name: '002_logs_retained_totals',
      statements: () => [
        ...['retained_bytes', 'raw_lines', 'event_lines'].map(
          (column) => `alter table logs_loggers add column ${column} bigint not null default 0`,
        ),
        `update logs_loggers set
          retained_bytes = (select coalesce(sum(bytes), 0) from logs_chunks c where c.logger_id = logs_loggers.id),
          raw_lines = (select coalesce(sum(lines), 0) from logs_chunks c where c.logger_id = logs_loggers.id and c.kind = 'raw'),
          event_lines = (select coalesce(sum(lines), 0) from logs_chunks c where c.logger_id = logs_loggers.id and c.kind = 'event')`,
      ],
    },
    {
      // Log text compresses ~5x, but PostgreSQL's default pglz caps an ingest at ~80 MB/s; lz4
      // keeps the size and writes ~400 MB/s. New chunks only; stored ones stay as they are.
      name: '003_logs_chunks_lz4',
      statements: ({ fastCompression }) => [...fastCompression('logs_chunks', 'data')],
    },
  ],
};
