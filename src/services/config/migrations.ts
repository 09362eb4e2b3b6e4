import type { MigrationSet } from '../../store/migrate.ts';

export const configMigrations: MigrationSet = {
  owner: 'config',
  migrations: [
    {
      name: '001_config_objects_and_user_entries',
      // `seq` keeps creation order for listing; entries are JSON text so key order survives.
      statements: ({ types }) => [
        `create table config_objects (seq ${types.serialPrimaryKey}, id text not null unique, entries text not null)`,
        'create table config_user_entries (user_id text primary key, entries text not null)',
      ],
    },
  ],
};
