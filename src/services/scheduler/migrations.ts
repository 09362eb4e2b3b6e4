import type { MigrationSet } from '../../store/migrate.ts';

export const schedulerMigrations: MigrationSet = {
  owner: 'scheduler',
  migrations: [
    {
      name: '001_schedulers_and_tasks',
      statements: ({ types }) => [
        // `seq` keeps creation order for listing. Times are epoch milliseconds.
        `create table scheduler_schedulers (seq ${types.serialPrimaryKey}, id text not null unique, display_name text not null, description text, created_ms bigint not null, updated_ms bigint not null)`,
        // One row per live task. `due_ms` is the task's due time while it is scheduled and its lease
        // expiry while leased: a task is claimable exactly when due_ms <= now, whether it is waiting
        // or its lease ran out, so a single index serves reserve, expiry and the next-wake timer.
        // `seq` is the enqueue order (ties in reserve, order of both lists).
        `create table scheduler_tasks (seq ${types.serialPrimaryKey}, scheduler_id text not null, id text not null, payload text not null, labels text not null, due_ms bigint not null, lease_id text, unique (scheduler_id, id))`,
        'create index scheduler_tasks_due on scheduler_tasks (scheduler_id, due_ms, seq)',
        'create index scheduler_tasks_order on scheduler_tasks (scheduler_id, seq)',
        // The key generated when SCHEDULER_API_KEYS is empty (README: Generated key): one row, shared by instances.
        'create table scheduler_generated_key (slot integer primary key, api_key text not null)',
      ],
    },
    {
      name: '002_delivery_targets_and_dead_letters',
      statements: ({ types }) => [
        // Issue 23: a scheduler's target (JSON: lambda id and owner, or webhook URL and sealed
        // secret) and retry policy (JSON; null = the defaults), both null on existing schedulers.
        'alter table scheduler_schedulers add column target text',
        'alter table scheduler_schedulers add column retry text',
        // Deliveries so far and the last one's error (README: Delivery); 0 / null for manual workers' tasks.
        'alter table scheduler_tasks add column attempts integer not null default 0',
        'alter table scheduler_tasks add column last_error text',
        // Tasks whose deliveries all failed. `seq` keeps the order they died in.
        `create table scheduler_dead (seq ${types.serialPrimaryKey}, scheduler_id text not null, id text not null, payload text not null, labels text not null, attempts integer not null, last_error text, failed_ms bigint not null, unique (scheduler_id, id))`,
        'create index scheduler_dead_order on scheduler_dead (scheduler_id, seq)',
      ],
    },
  ],
};
