import { sql } from 'kysely';
import { columnTypes, type MigrationSet } from '../../store/migrate.ts';

export const configMigrations: MigrationSet = {
  owner: 'config',
  migrations: [
    {
      name: '001_config_objects_and_user_entries',
      async up(db, dialect) {
        // `seq` keeps creation order for listing; entries are JSON text so key order survives.
        const seq = sql.raw(`seq ${columnTypes(dialect).serialPrimaryKey}`);
        await sql`create table config_objects (${seq}, id text not null unique, entries text not null)`.execute(db);
        await sql`create table config_user_entries (user_id text primary key, entries text not null)`.execute(db);
      },
    },
  ],
};
