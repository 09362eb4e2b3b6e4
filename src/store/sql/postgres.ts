import { createHash } from 'node:crypto';
import type pg from 'pg';
import { all, type Work } from '../sql-work.ts';
import { reachable } from '../unreachable.ts';
import { copyOutRows } from './copy-out.ts';
import type { NamedLock, SqlColumn, SqlDatabase, SqlRowSource, SqlSyntax } from './types.ts';

export const postgresSyntax: SqlSyntax = {
  forUpdate: ' for update',
  forShare: ' for share',
  forShareOf: (alias: string) => ` for share of ${alias}`,
  forUpdateSkipLocked: ' for update skip locked',
  binaryStoredAsIs: (table, column) => [`alter table ${table} alter column ${column} set storage external`],
  // A server built without lz4 lists no such value for the setting; it then keeps pglz.
  fastCompression: (table, column) => [
    `do $$ begin
      if exists (select 1 from pg_settings where name = 'default_toast_compression' and 'lz4' = any(enumvals)) then
        alter table ${table} alter column ${column} set compression lz4;
      end if;
    end $$`,
  ],
  byteLength: (expression) => `octet_length(${expression})`,
  position: (haystack, needle) => `strpos(${haystack}, ${needle})`,
  rowSources: arrayRows,
  types: {
    blob: 'bytea',
    serialPrimaryKey: 'bigserial primary key',
    bigint: 'bigint',
    withoutRowid: '',
    codePointText: 'text collate "C"',
  },
};

const ARRAY_TYPES: Record<SqlColumn['type'], string> = { bigint: 'bigint[]', text: 'text[]', blob: 'bytea[]' };

/**
 * One statement whatever the number of rows: an array per column, unnested side by side. Its
 * text depends only on the columns, and one multi-row statement of a few thousand rows costs
 * PostgreSQL far less to parse and plan than `values` lists of as many parameters.
 */
function arrayRows(columns: readonly SqlColumn[], rows: readonly (readonly unknown[])[]): SqlRowSource[] {
  if (rows.length === 0) return [];
  const arrays = columns.map((_column, i) => rows.map((row) => row[i]));
  const unnested = columns.map((column) => `cast(? as ${ARRAY_TYPES[column.type]})`).join(', ');
  const names = columns.map((column) => column.name).join(', ');
  return [{ source: `unnest(${unnested}) as v (${names})`, params: arrays, count: rows.length }];
}

// SQLSTATE codes: https://www.postgresql.org/docs/current/errcodes-appendix.html
const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';

function errorCode(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
}

/** `?` placeholders as PostgreSQL's `$1, $2, …`. Statements never contain a literal `?`. */
function numbered(text: string): string {
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}

/**
 * How many statement texts a database keeps prepared (`keepPrepared`): each connection of the pool
 * holds at most these, whatever the callers mark.
 */
const MAX_PREPARED = 64;

/**
 * A statement kept prepared: its numbered text under a name derived from that text, so that one
 * name never stands for two texts (node-postgres refuses that) and every connection parses it once.
 * Its text names only columns, never `*`: a schema change after it was prepared then cannot change
 * its result type, which PostgreSQL would refuse to run.
 */
interface Prepared {
  readonly name: string;
  readonly text: string;
}

/** `select *`, `returning *`, `t.*`: a result whose columns follow the table's (not `count(*)`). */
const ALL_COLUMNS = /\*\s*(?:from\b|,|$)|\.\*/i;

function prepared(text: string): Prepared {
  const numberedText = numbered(text);
  return { name: `s${createHash('sha256').update(numberedText).digest('hex').slice(0, 32)}`, text: numberedText };
}

/** Drives `work` on one client (inside a transaction) or on the pool (each statement on any client). */
async function drive<T>(
  work: Work<T>,
  client: pg.Pool | pg.PoolClient,
  kept: ReadonlyMap<string, Prepared>,
): Promise<T> {
  let step = work.next();
  while (!step.done) {
    const { text, params, kind } = step.value;
    let result: unknown;
    try {
      const statement = kept.get(text);
      const values = params as unknown[];
      const output = await (statement
        ? client.query({ name: statement.name, text: statement.text, values })
        : client.query(numbered(text), values));
      result = kind === 'all' ? output.rows : kind === 'first' ? output.rows[0] : (output.rowCount ?? 0);
    } catch (error) {
      step = work.throw(error);
      continue;
    }
    step = work.next(result);
  }
  return step.value;
}

/** The PostgreSQL adapter: each read on the pool, each write its own transaction on one client. */
export function postgresDatabase(pool: pg.Pool): SqlDatabase {
  const kept = new Map<string, Prepared>();
  const database: SqlDatabase = {
    dialect: 'postgres',
    syntax: postgresSyntax,
    queriesBlockTheProcess: false,
    soleWriter: false,
    writesShareCommits: false,
    // What escapes a work because the database is away leaves as a StoreUnreachableError (503).
    read<T>(make: () => Work<T>): Promise<T> {
      return reachable(drive(make(), pool, kept));
    },
    readLarge<T>(text: string, params: readonly (string | number)[], columns: readonly SqlColumn[]): Promise<T[]> {
      return reachable(checkedOut(pool, (client) => copyOutRows<T>(client, text, params, columns)));
    },
    // Each statement on the pool, outside any transaction block: PostgreSQL commits it by itself.
    writeEach<T>(make: () => Work<T>): Promise<T> {
      return reachable(drive(make(), pool, kept));
    },
    write<T>(make: () => Work<T>): Promise<T> {
      const observer = database.commitObserver;
      if (!observer) return reachable(transaction(pool, make, kept));
      const started = performance.now();
      return reachable(transaction(pool, make, kept)).then((value) => {
        observer('postgres_transaction', 1, (performance.now() - started) / 1000);
        return value;
      });
    },
    async analyze(tables: readonly string[]): Promise<void> {
      await reachable(pool.query(`analyze ${tables.join(', ')}`));
    },
    keepPrepared(texts: readonly string[]): void {
      for (const text of texts) {
        if (ALL_COLUMNS.test(text)) throw new Error(`keepPrepared: a kept statement names its columns: ${text}`);
        if (kept.size < MAX_PREPARED && !kept.has(text)) kept.set(text, prepared(text));
      }
    },
    lockName: (space: number, name: string): Work<void> => advisoryLocks([{ space, name }]),
    lockNames: advisoryLocks,
    isUniqueViolation: (error) => errorCode(error) === UNIQUE_VIOLATION,
    isForeignKeyViolation: (error) => errorCode(error) === FOREIGN_KEY_VIOLATION,
    commitObserver: null,
  };
  return database;
}

/** Transaction-scoped advisory locks, taken in the order given (a select list is evaluated left to right). */
function* advisoryLocks(locks: readonly NamedLock[]): Work<void> {
  if (locks.length === 0) return;
  yield* all(
    `select ${locks.map((_lock, i) => `pg_advisory_xact_lock(cast(? as integer), hashtext(?)) as l${i}`).join(', ')}`,
    ...locks.flatMap((lock) => [lock.space, lock.name]),
  );
}

/** `make`'s work in one transaction on one client of the pool. */
function transaction<T>(pool: pg.Pool, make: () => Work<T>, kept: ReadonlyMap<string, Prepared>): Promise<T> {
  return checkedOut(pool, async (client, breaks) => {
    await client.query('begin');
    try {
      const value = await drive(make(), client, kept);
      await client.query('commit');
      return value;
    } catch (error) {
      // A client that cannot even roll back is not given back to the pool.
      await client.query('rollback').catch((rollbackError: unknown) => breaks(rollbackError));
      throw error;
    }
  });
}

/**
 * `use` on a client taken from the pool, given back after (`breaks(error)`: not given back, it is
 * broken). The pool listens for errors only on its idle clients (and pool.query on its own). When
 * the server ends a checked-out connection between two statements (a restart: FATAL 57P01), the
 * error would be an unhandled 'error' event that ends the process. Kept instead: the next
 * statement fails on the dead client, and the client is not given back to the pool.
 */
async function checkedOut<T>(
  pool: pg.Pool,
  use: (client: pg.PoolClient, breaks: (error: unknown) => void) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const breaks = (error: unknown) => (broken ??= error instanceof Error ? error : new Error(String(error)));
  client.on('error', breaks);
  try {
    return await use(client, breaks);
  } finally {
    client.off('error', breaks);
    client.release(broken);
  }
}
