import { sql } from 'kysely';
import type { RootDb, SqlConnection, SqlDialect } from './db.ts';
import { postgresSyntax } from './sql/postgres.ts';
import { sqliteSyntax } from './sql/sqlite.ts';

/**
 * One schema change. `up` runs inside a transaction; it gets the dialect so that it can choose
 * column types where SQLite and PostgreSQL differ (see `columnTypes`).
 */
export interface Migration {
  readonly name: string;
  up(db: RootDb, dialect: SqlDialect): Promise<void>;
}

/** The migrations one owner (a service, or the store itself) applies, in order. */
export interface MigrationSet {
  readonly owner: string;
  readonly migrations: readonly Migration[];
}

/** Column types and table options that differ between the two databases. */
export function columnTypes(dialect: SqlDialect) {
  const syntax = dialect === 'postgres' ? postgresSyntax : sqliteSyntax;
  return {
    /** Large binary values. */
    blob: syntax.types.blob,
    /** 64-bit integers (milliseconds, byte counts). */
    bigint: 'bigint',
    /** An auto-numbered integer primary key (SQLite numbers only its rowid alias), for creation order. */
    serialPrimaryKey: syntax.types.serialPrimaryKey,
    /** Appended to `create table (…)` where SQLite should keep rows in the primary key's b-tree. */
    withoutRowid: syntax.withoutRowid,
  } as const;
}

// An arbitrary constant: every instance migrating the same PostgreSQL database takes this lock so
// two processes starting at once do not apply the same migration twice.
const PG_MIGRATION_LOCK = 7_316_420_021;

/**
 * Runs `work` in a transaction that holds the migration lock: an advisory lock on PostgreSQL, and
 * on SQLite `BEGIN IMMEDIATE`, which takes the write lock up front (a deferred transaction that
 * reads first fails with SQLITE_BUSY instead of waiting when another process migrates too).
 */
async function inMigrationTransaction<T>(connection: SqlConnection, work: (db: RootDb) => Promise<T>): Promise<T> {
  if (connection.dialect === 'postgres') {
    return connection.db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(${PG_MIGRATION_LOCK})`.execute(trx);
      return work(trx);
    });
  }
  return connection.db.connection().execute(async (db) => {
    await sql`begin immediate`.execute(db);
    try {
      const result = await work(db);
      await sql`commit`.execute(db);
      return result;
    } catch (error) {
      await sql`rollback`.execute(db);
      throw error;
    }
  });
}

/**
 * Applies every migration not yet recorded in `stratus_migrations`, owner by owner, each in its
 * own transaction. Returns the names it applied (`owner/name`).
 */
export async function migrate(connection: SqlConnection, sets: readonly MigrationSet[]): Promise<string[]> {
  const { dialect } = connection;
  // Under the migration lock too: PostgreSQL's `create table if not exists` is not safe against a
  // second process creating the same table at the same moment (a unique violation in pg_type).
  await inMigrationTransaction(connection, (trx) =>
    trx.schema
      .createTable('stratus_migrations')
      .ifNotExists()
      .addColumn('owner', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('applied_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('stratus_migrations_pk', ['owner', 'name'])
      .execute(),
  );

  const applied: string[] = [];
  for (const set of sets) {
    for (const migration of set.migrations) {
      const done = await inMigrationTransaction(connection, async (trx) => {
        const existing = await sql<{ name: string }>`select name from stratus_migrations where owner = ${set.owner} and name = ${migration.name}`.execute(trx);
        if (existing.rows.length > 0) return false;
        await migration.up(trx, dialect);
        await sql`insert into stratus_migrations (owner, name, applied_at) values (${set.owner}, ${migration.name}, ${new Date().toISOString()})`.execute(trx);
        return true;
      });
      if (done) applied.push(`${set.owner}/${migration.name}`);
    }
  }
  return applied;
}
