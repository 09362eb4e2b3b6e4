import type Database from 'better-sqlite3';
import { CompiledQuery, type Kysely } from 'kysely';
import type { SqlConnection, SqlDialect } from './db.ts';
import type { SqlDatabase } from './sql/types.ts';

/**
 * Storage work written once for both databases: a generator yields each statement and receives
 * its result. On SQLite it is driven synchronously through prepared statements (inside the group
 * commit for writes, so a whole batch of documents costs one commit and no promise per
 * statement); on PostgreSQL on the pg pool (sql/postgres.ts, which numbers the `?` placeholders), and
 * while Kysely holds the SQLite connection, through Kysely's queue. The adapters in sql/ drive it.
 */
export type Row = Record<string, unknown>;

interface Statement {
  readonly text: string;
  readonly params: readonly unknown[];
  /** 'all' returns rows, 'run' returns the number of changed rows. */
  readonly kind: 'all' | 'run';
}

export type Work<T> = Generator<Statement, T, unknown>;

export function* all<R = Row>(text: string, ...params: unknown[]): Generator<Statement, R[], unknown> {
  return (yield { text, params, kind: 'all' }) as R[];
}

export function* first<R = Row>(text: string, ...params: unknown[]): Generator<Statement, R | undefined, unknown> {
  const rows = (yield { text, params, kind: 'all' }) as R[];
  return rows[0];
}

export function* run(text: string, ...params: unknown[]): Generator<Statement, number, unknown> {
  return (yield { text, params, kind: 'run' }) as number;
}


/** better-sqlite3 binds booleans as errors and undefined as missing; normalise the few we use. */
function sqliteParams(params: readonly unknown[]): unknown[] {
  return params.map((p) => (typeof p === 'boolean' ? (p ? 1 : 0) : p));
}

export function driveSqlite<T>(work: Work<T>, prepare: (sql: string) => Database.Statement): T {
  let step = work.next();
  while (!step.done) {
    const { text, params, kind } = step.value;
    let result: unknown;
    try {
      const statement = prepare(text);
      result = kind === 'all' ? statement.all(...sqliteParams(params)) : statement.run(...sqliteParams(params)).changes;
    } catch (error) {
      step = work.throw(error);
      continue;
    }
    step = work.next(result);
  }
  return step.value;
}

/** SQLite only: drives work through Kysely's queue while Kysely holds the one connection. */
export async function driveKysely<T>(work: Work<T>, db: Kysely<object>): Promise<T> {
  let step = work.next();
  while (!step.done) {
    const { text, params, kind } = step.value;
    let result: unknown;
    try {
      const output = await db.executeQuery(CompiledQuery.raw(text, params as unknown[]));
      result = kind === 'all' ? output.rows : Number(output.numAffectedRows ?? 0n);
    } catch (error) {
      step = work.throw(error);
      continue;
    }
    step = work.next(result);
  }
  return step.value;
}

/** The connection's SQL port (see `sql/types.ts`), under the name repositories have used. */
export class SqlWork {
  readonly dialect: SqlDialect;
  private readonly database: SqlDatabase;
  constructor(connection: SqlConnection) {
    this.dialect = connection.dialect;
    this.database = connection.database;
  }

  /** A read: on SQLite synchronous when the connection is free. No transaction. */
  read<T>(make: () => Work<T>): Promise<T> {
    return this.database.read(make);
  }

  /** A write transaction (see `SqlDatabase.write`). */
  write<T>(make: () => Work<T>): Promise<T> {
    return this.database.write(make);
  }
}
