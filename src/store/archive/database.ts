import type { SqlDialect } from '../sql/types.ts';
import type { ArchiveColumn, ArchiveValue } from './format.ts';

/**
 * What export and import need of a database beyond the SQL port (`sql/types.ts`), which has no
 * long-lived read transaction, catalog or bulk load: one adapter per dialect (`sqlite.ts`,
 * `postgres.ts`), each on a connection of its own.
 */

/** A table as the database's catalog describes it. */
export interface TableShape {
  readonly name: string;
  readonly columns: readonly ArchiveColumn[];
  /** Primary key columns in key order (rows are read in this order); empty when it has none. */
  readonly primaryKey: readonly string[];
  /** The auto-numbered column (SQLite `autoincrement`, PostgreSQL serial), if any. */
  readonly serialColumn: string | null;
  /** Tables its foreign keys reference. */
  readonly references: readonly string[];
}

/** Applied migrations by owner (names sorted); empty when the database has no Stratus schema. */
export type AppliedMigrations = Record<string, string[]>;

/** One consistent read of a whole database: everything it answers is as of one instant. */
export interface Snapshot {
  readonly dialect: SqlDialect;
  migrations(): Promise<AppliedMigrations>;
  tables(): Promise<TableShape[]>;
  /** The table's rows in primary key order, each value as the driver gives it (bigint, Buffer, …). */
  rows(table: TableShape): AsyncIterable<Record<string, unknown>>;
  /** The next number the table's serial counter would give (at least its largest number + 1). */
  nextSerial(table: TableShape): Promise<number>;
  /** Ends the read transaction and the connection. */
  close(): Promise<void>;
}

/** What a load transaction may do. */
export interface Loader {
  /** Deletes every row (the rows a migration inserts, replaced by the archive's). */
  clear(table: TableShape): Promise<void>;
  /** Inserts rows, each its values in `columns` order. */
  insert(table: TableShape, columns: readonly string[], rows: readonly ArchiveValue[][]): Promise<void>;
  /** Makes the serial counter give `next` (or more, past the largest number now in the table) next. */
  setNextSerial(table: TableShape, next: number): Promise<void>;
}

/** The store an import fills. */
export interface LoadTarget {
  readonly dialect: SqlDialect;
  migrations(): Promise<AppliedMigrations>;
  tables(): Promise<TableShape[]>;
  /** The table's rows, at most `limit` of them, values as the driver gives them. */
  rows(table: TableShape, limit: number): Promise<Record<string, unknown>[]>;
  count(table: TableShape): Promise<number>;
  /** Runs `load` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction(load: (loader: Loader) => Promise<void>): Promise<void>;
  close(): Promise<void>;
}

/**
 * Tables ordered so that each comes after the tables its foreign keys reference (self-references
 * aside), by name among those free to go, so that loading in this order never breaks a key.
 */
export function loadOrder<T extends Pick<TableShape, 'name' | 'references'>>(tables: readonly T[]): T[] {
  const byName = new Map(tables.map((table) => [table.name, table]));
  const placed = new Set<string>();
  const ordered: T[] = [];
  const pending = [...tables].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  while (pending.length > 0) {
    const ready = pending.findIndex((table) =>
      table.references.every((parent) => parent === table.name || placed.has(parent) || !byName.has(parent)),
    );
    // A cycle of foreign keys (none in this schema): the rest in name order; the load then reports it.
    const [next] = pending.splice(ready === -1 ? 0 : ready, 1);
    placed.add(next!.name);
    ordered.push(next!);
  }
  return ordered;
}

/** `"name"`, for identifiers read from the catalog. */
export function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** Sorted owner → names from `stratus_migrations` rows. */
export function groupMigrations(rows: readonly { owner: string; name: string }[]): AppliedMigrations {
  const applied: AppliedMigrations = {};
  for (const { owner, name } of rows) (applied[owner] ??= []).push(name);
  for (const names of Object.values(applied)) names.sort();
  return applied;
}
