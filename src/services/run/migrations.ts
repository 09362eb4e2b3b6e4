import type { MigrationSet } from '../../store/migrate.ts';

/**
 * Run service tables (one set for SQLite and PostgreSQL).
 *
 * - `run_repositories`: one row per repository; `name` is unique, so the first push to an unused
 *   name creates it for its caller atomically. The desired state, env and volumes live on the row
 *   (env and volumes as JSON text, returned exactly as saved).
 * - `run_history`: deployments in `seq` order.
 * - `run_tags`: `seq` is assigned when a tag is first pushed and kept when it moves, which is the
 *   order `references` lists.
 * - `run_blobs`: which blobs are linked to which repository (the blob itself is in the shared
 *   blob store, held by a `run:<repository>` reference).
 * - `run_manifests`: manifests in SQL (at most 4 MiB each, read only for HEAD and validation).
 * - `run_uploads`: upload sessions; each chunk is its own blob (held by `run-upload:<uuid>`), the
 *   row keeps their order, so any instance can take the next chunk or finish the upload.
 * - `run_driver_records`: what the driver was last asked to apply; `message` is why the podman
 *   driver's last change failed (null when it succeeded).
 * - `run_settings`: values the service makes once, e.g. `engine_scope`, the label value that marks
 *   this platform's containers and volumes on a shared engine.
 */
export const runMigrations: MigrationSet = {
  owner: 'run',
  migrations: [
    {
      name: '001_run',
      statements: ({ types }) => [
        `create table run_repositories (
          seq ${types.serialPrimaryKey}, name text not null unique, owner text not null, created_at text not null,
          desired_state text not null default 'stopped', desired_reference text, desired_digest text,
          env text not null default '[]', volumes text not null default '[]')`,
        `create table run_history (
          seq ${types.serialPrimaryKey}, repository text not null, action text not null, reference text, digest text,
          user_id text not null, at text not null)`,
        `create index run_history_repository on run_history (repository, seq)`,
        `create table run_tags (
          seq ${types.serialPrimaryKey}, repository text not null, tag text not null, digest text not null,
          unique (repository, tag))`,
        `create table run_blobs (
          repository text not null, digest text not null, size bigint not null, created_at text not null,
          primary key (repository, digest))`,
        `create table run_manifests (
          repository text not null, digest text not null, media_type text not null, size bigint not null,
          body ${types.blob} not null, created_at text not null, primary key (repository, digest))`,
        `create table run_uploads (
          id text primary key, repository text not null, owner text not null, size bigint not null,
          parts text not null, created_at bigint not null, updated_at bigint not null)`,
        `create index run_uploads_updated on run_uploads (updated_at)`,
        `create table run_driver_records (
          repository text primary key, state text not null, reference text, digest text,
          env text not null, volumes text not null, applied_at text not null)`,
      ],
    },
    {
      name: '002_run_engine',
      statements: () => [
        `alter table run_driver_records add column message text`,
        `create table run_settings (name text primary key, value text not null)`,
      ],
    },
    {
      // Traffic: a repository's host label (`<slug>.run.<domain>`, unique, given at its first start)
      // and the loopback port its running container is published on.
      name: '003_run_traffic',
      statements: () => [
        `alter table run_repositories add column slug text`,
        `create unique index run_repositories_slug on run_repositories (slug)`,
        `alter table run_driver_records add column port integer`,
      ],
    },
    {
      // The logger a repository's container output goes to (null: none).
      name: '004_run_logger',
      statements: () => [`alter table run_repositories add column logger_id text`],
    },
  ],
};
