import { all, first, run } from './sql-work.ts';
import type { SqlDatabase, SqlSyntax } from './sql/types.ts';

/**
 * One schema change: its statements for one database, run in order in one transaction. `syntax`
 * gives what differs between SQLite and PostgreSQL (column types such as `types.blob` and
 * `types.serialPrimaryKey`, `withoutRowid`, `binaryStoredAsIs`, `fastCompression`); everything else is written once.
 */
export interface Migration {
  readonly name: string;
  statements(syntax: SqlSyntax): readonly string[];
}

/** The migrations one owner (a service, or the store itself) applies, in order. */
export interface MigrationSet {
  readonly owner: string;
  readonly migrations: readonly Migration[];
}

// An arbitrary constant: every instance migrating the same PostgreSQL database takes this lock so
// two processes starting at once do not apply the same migration twice. (SQLite's write
// transactions, `begin immediate`, already exclude every other writer, other processes included.)
const PG_MIGRATION_LOCK = 7_316_420_021;

function* migrationLock(database: SqlDatabase) {
  if (database.dialect === 'postgres') yield* all('select pg_advisory_xact_lock(cast(? as bigint))', PG_MIGRATION_LOCK);
}

/**
 * Applies every migration not yet recorded in `stratus_migrations`, owner by owner, each in its
 * own transaction under the migration lock. Returns the names it applied (`owner/name`).
 */
export async function migrate(database: SqlDatabase, sets: readonly MigrationSet[]): Promise<string[]> {
  // Under the migration lock too: PostgreSQL's `create table if not exists` is not safe against a
  // second process creating the same table at the same moment (a unique violation in pg_type).
  await database.write(function* () {
    yield* migrationLock(database);
    yield* run(
      'create table if not exists stratus_migrations (owner text not null, name text not null, applied_at text not null, constraint stratus_migrations_pk primary key (owner, name))',
    );
  });

  const applied: string[] = [];
  for (const set of sets) {
    for (const migration of set.migrations) {
      const done = await database.write(function* () {
        yield* migrationLock(database);
        const existing = yield* first(
          'select name from stratus_migrations where owner = ? and name = ?',
          set.owner,
          migration.name,
        );
        if (existing) return false;
        for (const statement of migration.statements(database.syntax)) yield* run(statement);
        yield* run(
          'insert into stratus_migrations (owner, name, applied_at) values (?, ?, ?)',
          set.owner,
          migration.name,
          new Date().toISOString(),
        );
        return true;
      });
      if (done) applied.push(`${set.owner}/${migration.name}`);
    }
  }
  return applied;
}
