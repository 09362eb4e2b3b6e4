import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { postgresDatabase } from './sql/postgres.ts';
import { sqliteDatabase } from './sql/sqlite.ts';
import type { SqlDatabase, SqlDialect } from './sql/types.ts';

export type { SqlDialect };

/**
 * The untyped root handle. Each repository narrows it with `db.withTables<MyTables>()`, so one
 * service's tables stay declared in its own folder.
 */
export type RootDb = Kysely<object>;

export interface SqlConnection {
  readonly dialect: SqlDialect;
  /** The SQL port every repository is moving to (see `sql/types.ts`). */
  readonly database: SqlDatabase;
  readonly db: RootDb;
  /** PostgreSQL only: the pool behind `db`, for adapters that stream (blobs) or need raw clients. */
  readonly pool?: pg.Pool;
  /** PostgreSQL only: the connection settings, for dedicated connections such as LISTEN. */
  readonly pgConfig?: pg.PoolConfig;
  /** PostgreSQL only: the schema the connection works in (from search_path), `public` by default. */
  readonly schema: string;
  /** SQLite only: synchronous access for hot paths (see DirectSqlite). */
  readonly direct?: DirectSqlite;
  close(): Promise<void>;
}

/**
 * Synchronous access to the SQLite connection behind Kysely, for hot paths: a query that never
 * awaits costs a few microseconds instead of Kysely's promise chain, and a read-modify-write runs
 * as one uninterrupted transaction. It shares Kysely's single connection, so while Kysely holds
 * a transaction open across an await, `run` declines (returns undefined) and the caller takes its
 * Kysely path, which waits its turn.
 */
export interface DirectSqlite {
  run<T>(work: (prepare: (sql: string) => Database.Statement) => T, options?: { transaction?: boolean }): { value: T } | undefined;
  /**
   * Group commit: `work` runs synchronously inside a transaction shared with the other writes
   * queued in the same turn of the event loop (each in its own savepoint, so one failing write
   * does not undo the others), and the promise settles once that transaction has committed. One
   * fsync then serves a whole burst of writes. Waits while Kysely holds a transaction.
   */
  write<T>(work: (prepare: (sql: string) => Database.Statement) => T): Promise<T>;
}

export interface SqliteOptions {
  /** `FULL` (default) survives power loss; `NORMAL` survives a process crash only. */
  synchronous?: 'FULL' | 'NORMAL';
}

const STATEMENT_CACHE_SIZE = 500;

/**
 * Kysely prepares every query anew; preparing costs as much as running a small query, so the
 * statements are kept by SQL text (queries are parameterised, so the set of texts is small).
 * Reusing one statement is safe because Kysely's SQLite driver runs one query at a time.
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

function directAccess(database: Database.Database, prepare: (text: string) => Database.Statement): DirectSqlite {
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
    try {
      prepare('begin immediate').run();
      if (batch.length === 1) {
        // Alone in its transaction: a failure rolls the whole transaction back, no savepoint needed.
        outcomes.push({ ok: true, value: batch[0]!.work(prepare) });
        prepare('commit').run();
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
    batch.forEach((job, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) job.resolve(outcome.value);
      else job.reject(outcome.value);
    });
  };

  // Writes queued in one turn go together. Commits (each an fsync) are at most one per
  // millisecond: an idle store commits at once, a busy one lets writes gather for up to a
  // millisecond so one fsync serves them all. A busy connection (an open Kysely transaction) is
  // retried a moment later, when that transaction has had the chance to finish.
  const schedule = (busy = false) => {
    if (scheduled) return;
    scheduled = true;
    const wait = busy ? 1 : lastCommit + MIN_COMMIT_INTERVAL_MS - performance.now();
    if (wait > 0) setTimeout(flush, wait);
    else setImmediate(flush);
  };

  return {
    run(work, options) {
      if (database.inTransaction) return undefined;
      if (!options?.transaction) return { value: work(prepare) };
      prepare('begin immediate').run();
      try {
        const value = work(prepare);
        prepare('commit').run();
        return { value };
      } catch (error) {
        if (database.inTransaction) prepare('rollback').run();
        throw error;
      }
    },
    write<T>(work: (prepare: (sql: string) => Database.Statement) => T): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
        schedule();
      });
    },
  };
}

export function openSqlite(file: string, options: SqliteOptions = {}): SqlConnection {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const database = new Database(file);
  database.pragma('journal_mode = WAL');
  database.pragma(`synchronous = ${options.synchronous ?? 'FULL'}`);
  database.pragma('foreign_keys = ON');
  database.pragma('busy_timeout = 5000');
  // A checkpoint copies every page the WAL holds back into the database file, inside some
  // unlucky commit. Checkpointing every ~40 MB of WAL instead of SQLite's ~4 MB lets repeated
  // writes to the same pages coalesce, so scattered updates cost far less checkpoint work.
  database.pragma('wal_autocheckpoint = 10000');
  // SQLite's default page cache is 2 MB: past that every read becomes a read() system call.
  // 64 MB of cache plus a memory-mapped file keeps indexed lookups in memory.
  database.pragma('cache_size = -65536');
  database.pragma('mmap_size = 1073741824');
  const prepare = statementCache(database);
  const db = new Kysely<object>({ dialect: new SqliteDialect({ database: { close: () => database.close(), prepare } }) });
  const direct = directAccess(database, prepare);
  return {
    dialect: 'sqlite',
    database: sqliteDatabase(db, direct),
    db,
    schema: 'main',
    direct,
    async close() {
      await db.destroy();
    },
  };
}

// int8 (COUNT, BIGINT columns) and numeric (SUM of a BIGINT column) come back from pg as strings;
// every BIGINT this platform stores (milliseconds, sizes, counters) and every sum of them fits in a
// double, and no table has a numeric column, so both are parsed as numbers, as SQLite returns them.
const PG_INT8_OID = 20;
const PG_NUMERIC_OID = 1700;
const pgTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if ((oid === PG_INT8_OID || oid === PG_NUMERIC_OID) && format !== 'binary') return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
};

export function pgConfigFromUrl(url: string, max = 10): pg.PoolConfig {
  return { connectionString: url, max, types: pgTypes as pg.CustomTypesConfig };
}

/** The schema named by `options=-c search_path=…` in the URL, else `public`. */
export function schemaFromUrl(url: string): string {
  try {
    const options = new URL(url).searchParams.get('options') ?? '';
    const match = /search_path\s*=\s*([A-Za-z_][A-Za-z0-9_]*)/.exec(options);
    return match?.[1] ?? 'public';
  } catch {
    return 'public';
  }
}

export async function openPostgres(url: string, max = 10): Promise<SqlConnection> {
  const pgConfig = pgConfigFromUrl(url, max);
  const pool = new pg.Pool(pgConfig);
  // An idle client that loses its server must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  const db = new Kysely<object>({ dialect: new PostgresDialect({ pool }) });
  await sql`select 1`.execute(db);
  return {
    dialect: 'postgres',
    database: postgresDatabase(pool),
    db,
    pool,
    pgConfig,
    schema: schemaFromUrl(url),
    async close() {
      await db.destroy();
    },
  };
}
