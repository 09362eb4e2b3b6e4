import Database from 'better-sqlite3';
import type { ArchiveValue } from './format.ts';
import {
  groupMigrations,
  quoteIdentifier,
  type AppliedMigrations,
  type LoadTarget,
  type Loader,
  type Snapshot,
  type TableShape,
} from './database.ts';

/**
 * The archive's SQLite adapter, on a connection of its own to the store's file (never the
 * platform's connection, which the group commit drives). Integers come back as bigint
 * (`safeIntegers`), so none above 2^53 is rounded on its way out.
 */

function catalog(db: Database.Database): TableShape[] {
  const tables = db
    .prepare(
      "select name, sql from sqlite_master where type = 'table' and name not like 'sqlite\\_%' escape '\\' order by name",
    )
    .all() as { name: string; sql: string }[];
  return tables.map(({ name, sql }) => {
    const columns = db.prepare('select name, type, pk from pragma_table_info(?) order by cid').all(name) as {
      name: string;
      type: string;
      pk: number;
    }[];
    const primaryKey = columns
      .filter((column) => column.pk > 0)
      .sort((a, b) => a.pk - b.pk)
      .map((column) => column.name);
    const references = db.prepare('select distinct "table" as parent from pragma_foreign_key_list(?)').all(name) as {
      parent: string;
    }[];
    return {
      name,
      columns: columns.map((column) => ({ name: column.name, type: column.type })),
      primaryKey,
      // Only an `integer primary key autoincrement` column has a counter of its own (sqlite_sequence).
      serialColumn: /\bautoincrement\b/i.test(sql) && primaryKey.length === 1 ? primaryKey[0]! : null,
      references: references.map((reference) => reference.parent),
    };
  });
}

function migrations(db: Database.Database): AppliedMigrations {
  const exists = db.prepare("select 1 from sqlite_master where type = 'table' and name = 'stratus_migrations'").get();
  if (!exists) return {};
  return groupMigrations(
    db.prepare('select owner, name from stratus_migrations').all() as { owner: string; name: string }[],
  );
}

function selectAll(table: TableShape): string {
  const columns = table.columns.map((column) => quoteIdentifier(column.name)).join(', ');
  const order = table.primaryKey.length > 0 ? table.primaryKey.map(quoteIdentifier).join(', ') : 'rowid';
  return `select ${columns} from ${quoteIdentifier(table.name)} order by ${order}`;
}

/** The serial counter's next number: past both what sqlite_sequence recorded and the largest number present. */
function nextSerial(db: Database.Database, table: TableShape, column: string): number {
  const recorded = db.prepare('select seq from sqlite_sequence where name = ?').safeIntegers(true).get(table.name) as
    { seq: bigint } | undefined;
  const largest = db
    .prepare(`select max(${quoteIdentifier(column)}) as n from ${quoteIdentifier(table.name)}`)
    .safeIntegers(true)
    .get() as { n: bigint | null };
  return Math.max(Number(recorded?.seq ?? 0n), Number(largest.n ?? 0n)) + 1;
}

/**
 * A read transaction on the store's file: in WAL mode the platform keeps writing meanwhile, and
 * every read here sees the database as of the first one (taken before this returns). While it is
 * open, checkpoints cannot pass it, so the WAL grows until it ends.
 */
export function openSqliteSnapshot(file: string): Snapshot {
  const db = new Database(file, { fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  db.prepare('begin').run();
  db.prepare('select count(*) from sqlite_master').get();
  return {
    dialect: 'sqlite',
    migrations: async () => migrations(db),
    tables: async () => catalog(db),
    async *rows(table) {
      yield* db.prepare(selectAll(table)).safeIntegers(true).iterate() as IterableIterator<Record<string, unknown>>;
    },
    nextSerial: async (table) => (table.serialColumn ? nextSerial(db, table, table.serialColumn) : 1),
    async close() {
      if (db.inTransaction) db.prepare('commit').run();
      db.close();
    },
  };
}

/** What better-sqlite3 binds: it takes no booleans, and binds a number as REAL (a `5` in a text column would read `5.0`). */
function bind(value: ArchiveValue): unknown {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? BigInt(value) : value;
  if (typeof value === 'boolean') return value ? 1n : 0n;
  return value;
}

/** The store's file, for an import: one write transaction (`begin immediate`) around the whole load. */
export function openSqliteTarget(file: string): LoadTarget {
  const db = new Database(file);
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  db.pragma('synchronous = FULL');
  const loader: Loader = {
    async clear(table) {
      db.prepare(`delete from ${quoteIdentifier(table.name)}`).run();
    },
    async insert(table, columns, rows) {
      const statement = db.prepare(
        `insert into ${quoteIdentifier(table.name)} (${columns.map(quoteIdentifier).join(', ')}) values (${columns.map(() => '?').join(', ')})`,
      );
      for (const row of rows) statement.run(...row.map(bind));
    },
    async setNextSerial(table, next) {
      if (!table.serialColumn) return;
      const seq = Math.max(next, nextSerial(db, table, table.serialColumn)) - 1;
      db.prepare('delete from sqlite_sequence where name = ?').run(table.name);
      db.prepare('insert into sqlite_sequence (name, seq) values (?, ?)').run(table.name, BigInt(seq));
    },
  };
  return {
    dialect: 'sqlite',
    migrations: async () => migrations(db),
    tables: async () => catalog(db),
    rows: async (table, limit) =>
      db
        .prepare(`${selectAll(table)} limit ?`)
        .safeIntegers(true)
        .all(limit) as Record<string, unknown>[],
    count: async (table) =>
      Number((db.prepare(`select count(*) as n from ${quoteIdentifier(table.name)}`).get() as { n: number }).n),
    async transaction(load) {
      db.prepare('begin immediate').run();
      try {
        await load(loader);
        db.prepare('commit').run();
      } catch (error) {
        if (db.inTransaction) db.prepare('rollback').run();
        throw error;
      }
    },
    async close() {
      db.close();
    },
  };
}
