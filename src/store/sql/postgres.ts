import type { RootDb } from '../db.ts';
import { all, driveKysely, type Work } from '../sql-work.ts';
import type { SqlDatabase, SqlSyntax } from './types.ts';

export const postgresSyntax: SqlSyntax = {
  forUpdate: ' for update',
  forShare: ' for share',
  forUpdateSkipLocked: ' for update skip locked',
  binaryStoredAsIs: (table, column) => [`alter table ${table} alter column ${column} set storage external`],
  byteLength: (expression) => `octet_length(${expression})`,
  position: (haystack, needle) => `strpos(${haystack}, ${needle})`,
  types: { blob: 'bytea', serialPrimaryKey: 'bigserial primary key', bigint: 'bigint', withoutRowid: '' },
};

// SQLSTATE codes: https://www.postgresql.org/docs/current/errcodes-appendix.html
const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';

function errorCode(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
}

/** The PostgreSQL adapter: each read a query on the pool, each write its own transaction. */
export function postgresDatabase(kysely: RootDb): SqlDatabase {
  return {
    dialect: 'postgres',
    syntax: postgresSyntax,
    queriesBlockTheProcess: false,
    soleWriter: false,
    read<T>(make: () => Work<T>): Promise<T> {
      return driveKysely(make(), kysely, 'postgres');
    },
    write<T>(make: () => Work<T>): Promise<T> {
      return kysely.transaction().execute((trx) => driveKysely(make(), trx, 'postgres'));
    },
    *lockName(space: number, name: string): Work<void> {
      yield* all('select pg_advisory_xact_lock(cast(? as integer), hashtext(?))', space, name);
    },
    isUniqueViolation: (error) => errorCode(error) === UNIQUE_VIOLATION,
    isForeignKeyViolation: (error) => errorCode(error) === FOREIGN_KEY_VIOLATION,
  };
}
