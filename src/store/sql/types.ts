import type { CommitObserver } from '../group-commit.ts';
import type { Work } from '../sql-work.ts';

export type SqlDialect = 'sqlite' | 'postgres';

/** A column of bound rows (`SqlSyntax.rowSources`): its name there and the type of its values. */
export interface SqlColumn {
  readonly name: string;
  readonly type: 'bigint' | 'text' | 'blob';
}

/** Bound rows as a row source: `from ${source}`, binding `params` where it stands in the statement. */
export interface SqlRowSource {
  readonly source: string;
  readonly params: readonly unknown[];
  /** How many of the rows it holds. */
  readonly count: number;
}

/**
 * The SQL text that differs between the two databases, as fragments a repository splices into its
 * statements. Everything else is written once: statements use `?` placeholders, `on conflict …
 * do nothing|do update set … = excluded.…`, `returning`, and `limit`, which both databases accept.
 */
export interface SqlSyntax {
  /**
   * Appended to a `select` inside a write that changes what it read. PostgreSQL locks the rows;
   * on SQLite it is empty, because a write transaction (`begin immediate`) already excludes every
   * other writer.
   */
  readonly forUpdate: string;
  /** Appended to a `select` that must keep its rows from changing until the write commits. */
  readonly forShare: string;
  /** `forShare` for the rows of one table of a join (`alias`), as an outer join's nullable side cannot be locked. */
  forShareOf(alias: string): string;
  /** Appended to a claim's `select`: rows another transaction holds are skipped, not waited for. */
  readonly forUpdateSkipLocked: string;
  /**
   * Statements that make a binary column store its values as they are, uncompressed and out of line
   * (PostgreSQL `set storage external`: blob content is mostly compressed already); none on SQLite.
   */
  binaryStoredAsIs(table: string, column: string): readonly string[];
  /**
   * Statements that make a column compress its new values with a fast method where the database
   * has one (PostgreSQL's lz4, when the server was built with it: pglz writes ~5x slower for a
   * like size); none on SQLite, which does not compress.
   */
  fastCompression(table: string, column: string): readonly string[];
  /** Length in bytes of a text or binary expression (SQLite's `length` counts characters of text). */
  byteLength(expression: string): string;
  /** 1-based position of `needle` in `haystack`, 0 when absent. */
  position(haystack: string, needle: string): string;
  /**
   * `rows` (each its values in `columns` order) as row sources for a `from` clause, aliased `v`
   * with the columns' names, in their order, together holding every row once: on PostgreSQL one
   * source over an array per column (`unnest`), however many rows, so a batch costs one statement;
   * on SQLite `values` lists of power-of-two sizes (at most 1,024 rows), so that few statement
   * texts exist to be prepared and cached. None for no rows.
   */
  rowSources(columns: readonly SqlColumn[], rows: readonly (readonly unknown[])[]): SqlRowSource[];
  /** Column types. */
  readonly types: {
    /** Large binary values. */
    readonly blob: 'blob' | 'bytea';
    /** An auto-numbered integer primary key, for creation order. */
    readonly serialPrimaryKey: string;
    /** 64-bit integers (milliseconds, byte counts). */
    readonly bigint: 'bigint';
    /** Appended to `create table (…)` where SQLite should store the rows in the primary key's b-tree. */
    readonly withoutRowid: string;
    /**
     * Text that sorts and compares by Unicode code point, whatever the database's locale (UTF-8 bytes
     * in order: SQLite's default BINARY collation, PostgreSQL's "C" collation).
     */
    readonly codePointText: string;
  };
}

/** A lock `lockName` takes: `space` a constant of the caller, `name` any text. */
export interface NamedLock {
  readonly space: number;
  readonly name: string;
}

/**
 * The SQL port: the one door to the database for every repository. Work is written once as a
 * generator of statements (see `sql-work.ts`: `all`, `first`, `run`) and the adapter drives it:
 * SQLite synchronously through cached prepared statements, PostgreSQL through its pool.
 */
export interface SqlDatabase {
  /** Which adapter this is; for the store's own wiring and for labels, never for branching in services. */
  readonly dialect: SqlDialect;
  readonly syntax: SqlSyntax;
  /**
   * True where queries run on this process's own thread (SQLite). A long scan then holds every
   * other request up for its whole length, so repositories cut such scans into slices; where it is
   * false (PostgreSQL) one query is cheaper than many.
   */
  readonly queriesBlockTheProcess: boolean;
  /**
   * True where this process is the database's only writer (the embedded SQLite file), so a cache of
   * rows kept up to date by this process's own writes is never stale; false where other instances
   * write too (PostgreSQL).
   */
  readonly soleWriter: boolean;
  /**
   * True where concurrent writes already share one transaction and one commit (SQLite's group
   * commit): gathering them into multi-row statements first (`GroupCommit`) would only add a wait.
   * False where each write commits on its own (PostgreSQL), where gathering them pays.
   */
  readonly writesShareCommits: boolean;
  /** A read outside any transaction (on SQLite synchronous when the connection is free). */
  read<T>(make: () => Work<T>): Promise<T>;
  /**
   * The rows of a `select` that returns large binary values, read the fastest way the database
   * has. `columns` are the select's columns in order with their types. PostgreSQL sends `bytea` in
   * an ordinary query as hex text (~160 MB/s into this process here), so there the select runs as
   * a binary COPY (`copy-out.ts`: ~3x that); SQLite reads it as `read` does. Its parameters are
   * safe integers and strings only (COPY takes none: PostgreSQL inlines them as literals).
   */
  readLarge<T>(text: string, params: readonly (string | number)[], columns: readonly SqlColumn[]): Promise<T[]>;
  /**
   * A transaction. On SQLite it joins the group commit: it runs inside a transaction shared with
   * the writes of the same turn, in its own savepoint (one failing write does not undo the others),
   * and settles once that transaction has committed. On PostgreSQL it is its own transaction.
   * `make` may run again if the first attempt could not start, so it must have no side effects
   * outside the database before it is driven.
   */
  write<T>(make: () => Work<T>): Promise<T>;
  /**
   * A write whose statements need no transaction around them: each one is atomic by itself, and
   * those after the first only read (say, why an update matched no row). On PostgreSQL each
   * statement then commits on its own, one round trip instead of three (begin, statement, commit);
   * on SQLite it is `write`, in the group commit.
   */
  writeEach<T>(make: () => Work<T>): Promise<T>;
  /**
   * Work that serialises the write it runs in against every other write that takes the same lock
   * (`space` a constant of the caller, `name` any text), until that write ends: an advisory
   * transaction lock on PostgreSQL; nothing on SQLite, where writes are already one at a time.
   */
  lockName(space: number, name: string): Work<void>;
  /** `lockName` for each of `locks`, in their order, in one statement. */
  lockNames(locks: readonly NamedLock[]): Work<void>;
  /**
   * Brings the planner's statistics of `tables` up to date (PostgreSQL `ANALYZE`), after a bulk
   * change its autovacuum would notice only later, or never: it waits for 10% of a table to change,
   * while one collection's new rows in a shared table can be far fewer and still plan badly. A
   * no-op on SQLite, whose plans here come from the schema. Names are the caller's constants.
   */
  analyze(tables: readonly string[]): Promise<void>;
  /**
   * Statement texts run often enough to keep prepared (`?` placeholders; the caller's constants,
   * never text built from data): PostgreSQL then parses and plans each once per connection instead
   * of at every run (a scheduler claim took longer to plan than to execute). Absent on SQLite,
   * which keeps every statement prepared already. Ignored past a bound, so that a connection holds
   * few statements.
   */
  keepPrepared?(texts: readonly string[]): void;
  /** True for a unique or primary key violation thrown by this database. */
  isUniqueViolation(error: unknown): boolean;
  /** True for a foreign key violation (the referenced row is gone). */
  isForeignKeyViolation(error: unknown): boolean;
  /**
   * Told of every commit of a write (SQLite: each shared transaction of the group commit and the
   * writes in it; PostgreSQL: each `write`'s transaction) and of the batches of the `GroupCommit`s
   * that write here. Set once by the platform for its metrics; null or absent: nobody is told.
   */
  commitObserver?: CommitObserver | null;
}
