import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import pg from 'pg';
import { postgresDatabase } from './sql/postgres.ts';
import { sqliteDatabase } from './sql/sqlite.ts';
import type { SqlDatabase, SqlDialect } from './sql/types.ts';

export type { SqlDialect };

export interface SqlConnection {
  readonly dialect: SqlDialect;
  /** The SQL port, every repository's door to the database (see `sql/types.ts`). */
  readonly database: SqlDatabase;
  /** PostgreSQL only: the pool behind `database`, for adapters that stream (blobs) or need raw clients. */
  readonly pool?: pg.Pool;
  /** PostgreSQL only: the connection settings, for dedicated connections such as LISTEN. */
  readonly pgConfig?: pg.PoolConfig;
  /** PostgreSQL only: the schema the connection works in (from search_path), `public` by default. */
  readonly schema: string;
  close(): Promise<void>;
}

export interface SqliteOptions {
  /** `FULL` (default) survives power loss; `NORMAL` survives a process crash only. */
  synchronous?: 'FULL' | 'NORMAL';
  /** SQLite's page cache in bytes (default 32 MiB; SQLite's own default is 2 MiB). */
  cacheBytes?: number;
  /** Bytes of the file to memory-map (default 0: none). */
  mmapBytes?: number;
}

export const DEFAULT_SQLITE_CACHE_BYTES = 32 * 1024 ** 2;

/**
 * Switches a database file to WAL. Two processes opening a new file at once (two `stratus
 * migrate`, or instances started together) both try it, and the switch needs the file to
 * itself: SQLite answers SQLITE_BUSY at once, without its busy handler, to the one that loses.
 * That one waits a moment and tries again (up to about five seconds, as the busy timeout).
 */
function walMode(database: Database.Database): void {
  const deadline = Date.now() + 5_000;
  for (;;) {
    try {
      database.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      const busy = (error as { code?: unknown }).code === 'SQLITE_BUSY';
      if (!busy || Date.now() >= deadline) throw error;
      // A synchronous pause: opening is synchronous, and this happens only at start.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
    }
  }
}

export function openSqlite(file: string, options: SqliteOptions = {}): SqlConnection {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const database = new Database(file);
  walMode(database);
  database.pragma(`synchronous = ${options.synchronous ?? 'FULL'}`);
  database.pragma('foreign_keys = ON');
  database.pragma('busy_timeout = 5000');
  // A checkpoint copies every page the WAL holds back into the database file, inside some
  // unlucky commit. Checkpointing every ~40 MB of WAL instead of SQLite's ~4 MB lets repeated
  // writes to the same pages coalesce, so scattered updates cost far less checkpoint work.
  database.pragma('wal_autocheckpoint = 10000');
  // SQLite's default page cache is 2 MB: past that every read becomes a read() system call (of a
  // page the kernel usually has cached). A larger cache keeps indexed lookups in process memory;
  // it is bounded, unlike a mapping of the file, whose pages stay in the RSS once read.
  database.pragma(`cache_size = -${Math.ceil((options.cacheBytes ?? DEFAULT_SQLITE_CACHE_BYTES) / 1024)}`);
  database.pragma(`mmap_size = ${options.mmapBytes ?? 0}`);
  return {
    dialect: 'sqlite',
    database: sqliteDatabase(database),
    schema: 'main',
    async close() {
      database.close();
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
  await pool.query('select 1');
  let ended: Promise<void> | undefined;
  return {
    dialect: 'postgres',
    database: postgresDatabase(pool),
    pool,
    pgConfig,
    schema: schemaFromUrl(url),
    // Closing twice is harmless (the pool itself refuses a second end).
    close: () => (ended ??= pool.end()),
  };
}
