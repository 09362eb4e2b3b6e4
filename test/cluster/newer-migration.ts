import type { Migration } from '../../src/store/migrate.ts';

/** The config service's migration that only the newer-schema launcher (newer-schema.ts) has. */
export const NEWER_MIGRATION: Migration = {
  name: '900_fault_test_upgrade_probe',
  // PostgreSQL only (the cluster harness). Each statement fails if it ran a second time, so a double
  // apply would stop the second instance's start.
  statements: () => [
    // Held long enough that an instance starting at the same moment reaches the migration lock meanwhile.
    'select pg_sleep(2)',
    'create table config_upgrade_probe (id integer primary key, backend integer not null)',
    'insert into config_upgrade_probe (id, backend) values (1, pg_backend_pid())',
    // An online change to a table the running (older) instances write under load: a nullable column.
    'alter table config_objects add column upgrade_note text',
  ],
};
