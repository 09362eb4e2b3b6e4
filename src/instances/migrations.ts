import type { MigrationSet } from '../store/migrate.ts';

/**
 * The instance registry (README.md): one row per running Stratus process of the platform, and the
 * counters each one publishes (absolute totals since its start, one JSON value per owner and name).
 * A counter row goes with its instance (`on delete cascade`), so removing an instance that closed
 * or stopped heartbeating removes its figures too.
 */
export const instancesMigrations: MigrationSet = {
  owner: 'instances',
  migrations: [
    {
      name: '001_instances',
      statements: ({ types }) => [
        `create table stratus_instances (
          id text not null primary key, host text not null, pid integer not null, version text not null,
          services text not null, started_at ${types.bigint} not null, last_seen ${types.bigint} not null)`,
        `create index stratus_instances_last_seen on stratus_instances (last_seen)`,
        `create table stratus_instance_counters (
          instance_id text not null references stratus_instances (id) on delete cascade,
          owner text not null, name text not null, value text not null,
          constraint stratus_instance_counters_pk primary key (instance_id, owner, name))`,
        `create index stratus_instance_counters_name on stratus_instance_counters (owner, name)`,
      ],
    },
  ],
};
