import type Database from 'better-sqlite3';
import { all, driveSqlite, type Work } from '../sql-work.ts';
import type { CommitObserver } from '../group-commit.ts';
import type { SqlColumn, SqlDatabase, SqlRowSource, SqlSyntax } from './types.ts';

export const sqliteSyntax: SqlSyntax = {
  forUpdate: '',
  forShare: '',
  forShareOf: () => '',
  forUpdateSkipLocked: '',
  binaryStoredAsIs: () => [],
  fastCompression: () => [],
  byteLength: (expression) => `length(cast(${expression} as blob))`,
  position: (haystack, needle) => `instr(${haystack}, ${needle})`,
  rowSources: valuesRows,
  types: {
    blob: 'blob',
    serialPrimaryKey: 'integer primary key autoincrement',
    bigint: 'bigint',
    withoutRowid: ' without rowid',
    codePointText: 'text',
  },
};

const MAX_VALUES_ROWS = 1024;

/**
 * `values` lists of power-of-two sizes, largest first (300 rows: 256 + 32 + 8 + 4), each its own
 * statement text, cached like any other; the `select` names the columns (SQLite names a `values`
 * list's columns column1, column2, …).
 */
function valuesRows(columns: readonly SqlColumn[], rows: readonly (readonly unknown[])[]): SqlRowSource[] {
  const sources: SqlRowSource[] = [];
  const names = columns.map((column, i) => `column${i + 1} as ${column.name}`).join(', ');
  for (let at = 0; at < rows.length;) {
    const count = Math.min(MAX_VALUES_ROWS, 2 ** Math.floor(Math.log2(rows.length - at)));
    const params: unknown[] = [];
    for (const values of rows.slice(at, at + count)) params.push(...values);
    sources.push({
      source: `(select ${names} from (values ${valuesList(columns.length, count)})) as v`,
      params,
      count,
    });
    at += count;
  }
  return sources;
}

const valuesLists = new Map<string, string>();

/** `(?, ?), (?, ?), …`: `count` rows of `width` placeholders, built once per shape. */
function valuesList(width: number, count: number): string {
  const shape = `${width}x${count}`;
  let list = valuesLists.get(shape);
  if (list === undefined) {
    const row = `(${Array.from({ length: width }, () => '?').join(', ')})`;
    list = Array.from({ length: count }, () => row).join(', ');
    valuesLists.set(shape, list);
  }
  return list;
}

const UNIQUE_CODES = new Set(['SQLITE_CONSTRAINT_PRIMARYKEY', 'SQLITE_CONSTRAINT_UNIQUE']);

function errorCode(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
}

const STATEMENT_CACHE_SIZE = 500;

/**
 * Preparing a statement costs as much as running a small query, so the statements are kept by SQL
 * text (queries are parameterised, so the set of texts is small). Reusing one statement is safe
 * because the connection runs one statement at a time, synchronously, to its end.
 */
function statementCache(database: Database.Database): (text: string) => Database.Statement {
  const cache = new Map<string, Database.Statement>();
  return (text: string) => {
    let statement = cache.get(text);
    if (!statement) {
      statement = database.prepare(text);
      if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value as string);
      cache.set(text, statement);
    }
    return statement;
  };
}

const MIN_COMMIT_INTERVAL_MS = 1;

interface QueuedWrite {
  work: (prepare: (sql: string) => Database.Statement) => unknown;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/**
 * The group commit: `work` runs synchronously inside a transaction shared with the other writes
 * queued in the same turn of the event loop (each in its own savepoint, so one failing write does
 * not undo the others), and the promise settles once that transaction has committed. One fsync
 * then serves a whole burst of writes.
 */
function groupCommit(
  database: Database.Database,
  prepare: (text: string) => Database.Statement,
  observer: () => CommitObserver | null | undefined,
): <T>(work: (prepare: (sql: string) => Database.Statement) => T) => Promise<T> {
  let queue: QueuedWrite[] = [];
  let scheduled = false;
  let lastCommit = 0;

  const flush = () => {
    scheduled = false;
    lastCommit = performance.now();
    if (database.inTransaction) return schedule(true);
    const batch = queue;
    queue = [];
    const outcomes: { ok: boolean; value: unknown }[] = [];
    const started = lastCommit;
    try {
      prepare('begin immediate').run();
      if (batch.length === 1) {
        // Alone in its transaction: a failure rolls the whole transaction back, no savepoint needed.
        outcomes.push({ ok: true, value: batch[0]!.work(prepare) });
        prepare('commit').run();
        observer()?.('sqlite_transaction', 1, (performance.now() - started) / 1000);
        batch[0]!.resolve(outcomes[0]!.value);
        return;
      }
      for (const job of batch) {
        prepare('savepoint stratus_write').run();
        try {
          outcomes.push({ ok: true, value: job.work(prepare) });
          prepare('release stratus_write').run();
        } catch (error) {
          prepare('rollback to stratus_write').run();
          prepare('release stratus_write').run();
          outcomes.push({ ok: false, value: error });
        }
      }
      prepare('commit').run();
    } catch (error) {
      if (database.inTransaction) prepare('rollback').run();
      for (const job of batch) job.reject(error);
      return;
    }
    observer()?.('sqlite_transaction', batch.length, (performance.now() - started) / 1000);
    batch.forEach((job, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) job.resolve(outcome.value);
      else job.reject(outcome.value);
    });
  };

  // Writes queued in one turn go together. Commits (each an fsync) are at most one per
  // millisecond: an idle store commits at once, a busy one lets writes gather for up to a
  // millisecond so one fsync serves them all. A busy connection (a transaction still open) is
  // retried a moment later, when that transaction has had the chance to finish.
  const schedule = (busy = false) => {
    if (scheduled) return;
    scheduled = true;
    const wait = busy ? 1 : lastCommit + MIN_COMMIT_INTERVAL_MS - performance.now();
    if (wait > 0) setTimeout(flush, wait);
    else setImmediate(flush);
  };

  return <T>(work: (prepare: (sql: string) => Database.Statement) => T): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
      schedule();
    });
}

/**
 * The SQLite adapter over one better-sqlite3 connection: work runs synchronously on cached
 * prepared statements, a read at once (a query that never awaits costs a few microseconds) and a
 * write in the group commit. A read asked for while the connection is inside a write's
 * transaction (from within that write's work) waits for the transaction to end instead of
 * reading what it has not committed.
 */
export function sqliteDatabase(connection: Database.Database): SqlDatabase {
  const prepare = statementCache(connection);
  const commit = groupCommit(connection, prepare, () => database.commitObserver);
  const readAfterTransaction = async <T>(make: () => Work<T>): Promise<T> => {
    while (connection.inTransaction) await new Promise((resolve) => setImmediate(resolve));
    return driveSqlite(make(), prepare);
  };
  const database: SqlDatabase = {
    dialect: 'sqlite',
    syntax: sqliteSyntax,
    queriesBlockTheProcess: true,
    soleWriter: true,
    writesShareCommits: true,
    read<T>(make: () => Work<T>): Promise<T> {
      // The common case settles at once, without an async function's extra promise and turn.
      if (!connection.inTransaction) {
        try {
          return Promise.resolve(driveSqlite(make(), prepare));
        } catch (error) {
          return Promise.reject(error as Error);
        }
      }
      return readAfterTransaction(make);
    },
    readLarge<T>(text: string, params: readonly (string | number)[]): Promise<T[]> {
      return this.read(() => all<T>(text, ...params));
    },
    write<T>(make: () => Work<T>): Promise<T> {
      return commit((prepare) => driveSqlite(make(), prepare));
    },
    // A commit costs an fsync here, which the group commit shares: such a write joins it too.
    writeEach<T>(make: () => Work<T>): Promise<T> {
      return commit((prepare) => driveSqlite(make(), prepare));
    },
    analyze: () => Promise.resolve(),
    // Writes on SQLite are serial already: nothing to lock.
    *lockName(): Work<void> {},
    *lockNames(): Work<void> {},
    isUniqueViolation: (error) => UNIQUE_CODES.has(errorCode(error) as string),
    isForeignKeyViolation: (error) => errorCode(error) === 'SQLITE_CONSTRAINT_FOREIGNKEY',
    commitObserver: null,
  };
  return database;
}
