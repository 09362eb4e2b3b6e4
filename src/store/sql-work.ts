import type Database from 'better-sqlite3';

/**
 * Storage work written once for both databases: a generator yields each statement and receives
 * its result. On SQLite it is driven synchronously through prepared statements (inside the group
 * commit for writes, so a whole batch of documents costs one commit and no promise per
 * statement); on PostgreSQL on the pg pool (sql/postgres.ts, which numbers the `?` placeholders).
 * The adapters in sql/ drive it; repositories hand it to `SqlDatabase.read` or `write`.
 */
export type Row = Record<string, unknown>;

interface Statement {
  readonly text: string;
  readonly params: readonly unknown[];
  /** 'all' returns rows, 'first' the first row (or undefined), 'run' the number of changed rows. */
  readonly kind: 'all' | 'first' | 'run';
}

export type Work<T> = Generator<Statement, T, unknown>;

export function* all<R = Row>(text: string, ...params: unknown[]): Generator<Statement, R[], unknown> {
  return (yield { text, params, kind: 'all' }) as R[];
}

export function* first<R = Row>(text: string, ...params: unknown[]): Generator<Statement, R | undefined, unknown> {
  // SQLite stops at the first row (better-sqlite3 `get`) instead of stepping on to the end.
  return (yield { text, params, kind: 'first' }) as R | undefined;
}

export function* run(text: string, ...params: unknown[]): Generator<Statement, number, unknown> {
  return (yield { text, params, kind: 'run' }) as number;
}

/** better-sqlite3 binds booleans as errors and undefined as missing; normalise the few we use. */
function sqliteParams(params: readonly unknown[]): readonly unknown[] {
  // Most statements bind no boolean: no copy then.
  return params.some((p) => typeof p === 'boolean')
    ? params.map((p) => (typeof p === 'boolean' ? (p ? 1 : 0) : p))
    : params;
}

export function driveSqlite<T>(work: Work<T>, prepare: (sql: string) => Database.Statement): T {
  let step = work.next();
  while (!step.done) {
    const { text, params, kind } = step.value;
    let result: unknown;
    try {
      const statement = prepare(text);
      const bound = sqliteParams(params);
      // A data-changing statement with RETURNING makes all its changes on the first step (SQLite's
      // documentation of RETURNING), so `get` is as complete as `all` for it.
      result =
        kind === 'all'
          ? statement.all(...bound)
          : kind === 'first'
            ? statement.get(...bound)
            : statement.run(...bound).changes;
    } catch (error) {
      step = work.throw(error);
      continue;
    }
    step = work.next(result);
  }
  return step.value;
}
