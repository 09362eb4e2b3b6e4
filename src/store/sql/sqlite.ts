import type { DirectSqlite, RootDb } from '../db.ts';
import { driveKysely, driveSqlite, type Work } from '../sql-work.ts';
import type { SqlDatabase, SqlSyntax } from './types.ts';

export const sqliteSyntax: SqlSyntax = {
  forUpdate: '',
  forShare: '',
  forUpdateSkipLocked: '',
  binaryStoredAsIs: () => [],
  byteLength: (expression) => `length(cast(${expression} as blob))`,
  position: (haystack, needle) => `instr(${haystack}, ${needle})`,
  types: { blob: 'blob', serialPrimaryKey: 'integer primary key autoincrement', bigint: 'bigint', withoutRowid: ' without rowid', codePointText: 'text' },
};

const UNIQUE_CODES = new Set(['SQLITE_CONSTRAINT_PRIMARYKEY', 'SQLITE_CONSTRAINT_UNIQUE']);

function errorCode(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
}

/**
 * The SQLite adapter: work runs synchronously on cached prepared statements (`direct`), reads at
 * once when the connection is free and writes in the group commit. While Kysely holds the one
 * connection in a transaction across an await, a read takes Kysely's queue instead.
 */
export function sqliteDatabase(kysely: RootDb, direct: DirectSqlite): SqlDatabase {
  return {
    dialect: 'sqlite',
    syntax: sqliteSyntax,
    queriesBlockTheProcess: true,
    soleWriter: true,
    async read<T>(make: () => Work<T>): Promise<T> {
      const now = direct.run((prepare) => driveSqlite(make(), prepare));
      if (now) return now.value;
      return driveKysely(make(), kysely);
    },
    write<T>(make: () => Work<T>): Promise<T> {
      return direct.write((prepare) => driveSqlite(make(), prepare));
    },
    // Writes on SQLite are serial already: nothing to lock.
    *lockName(): Work<void> {},
    isUniqueViolation: (error) => UNIQUE_CODES.has(errorCode(error) as string),
    isForeignKeyViolation: (error) => errorCode(error) === 'SQLITE_CONSTRAINT_FOREIGNKEY',
  };
}
