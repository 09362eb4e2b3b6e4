import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';

export type SqlDialect = 'sqlite' | 'postgres';

/**
 * The untyped root handle. Each repository narrows it with `db.withTables<MyTables>()`, so one
 * service's tables stay declared in its own folder.
 */
export type RootDb = Kysely<object>;

export interface SqlConnection {
  readonly dialect: SqlDialect;
  readonly db: RootDb;
  /** PostgreSQL only: the pool behind `db`, for adapters that stream (blobs) or need raw clients. */
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
}

const STATEMENT_CACHE_SIZE = 500;

/**
 * Kysely prepares every query anew; preparing costs as much as running a small query, so the
 * statements are kept by SQL text (queries are parameterised, so the set of texts is small).
 * Reusing one statement is safe because Kysely's SQLite driver runs one query at a time.
 */
function withStatementCache(database: Database.Database): SqliteDatabaseLike {
  const cache = new Map<string, Database.Statement>();
  return {
    close: () => database.close(),
    prepare(text: string) {
      let statement = cache.get(text);
      if (!statement) {
        statement = database.prepare(text);
        if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value as string);
        cache.set(text, statement);
      }
      return statement;
    },
  };
}

type SqliteDatabaseLike = ConstructorParameters<typeof SqliteDialect>[0]['database'] & object;

export function openSqlite(file: string, options: SqliteOptions = {}): SqlConnection {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const database = new Database(file);
  database.pragma('journal_mode = WAL');
  database.pragma(`synchronous = ${options.synchronous ?? 'FULL'}`);
  database.pragma('foreign_keys = ON');
  database.pragma('busy_timeout = 5000');
  const db = new Kysely<object>({ dialect: new SqliteDialect({ database: withStatementCache(database) }) });
  return {
    dialect: 'sqlite',
    db,
    schema: 'main',
    async close() {
      await db.destroy();
    },
  };
}

// int8 (COUNT, BIGINT columns) comes back from pg as a string; every BIGINT this platform stores
// (milliseconds, sizes, counters) fits in a double, so it is parsed as a number.
const PG_INT8_OID = 20;
const pgTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === PG_INT8_OID && format !== 'binary') return (value: string) => Number(value);
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
    db,
    pool,
    pgConfig,
    schema: schemaFromUrl(url),
    async close() {
      await db.destroy();
    },
  };
}
