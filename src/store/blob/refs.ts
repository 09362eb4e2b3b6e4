import { sql } from 'kysely';
import type { SqlConnection } from '../db.ts';
import { SqlWork, all, first, run, type Work } from '../sql-work.ts';
import type { BlobStore } from './types.ts';

/**
 * Reference tracking for the shared, content-addressed blob store.
 *
 * Blobs are shared: two files with the same bytes, or a file and a registry layer, are one blob.
 * So no service deletes a blob itself. A service names each blob it uses with a reference
 * `(sha256, holder)` (the holder is the service's own key, e.g. `files:<file id>`), added and
 * removed in the same transaction as the metadata that uses the blob. Losing a reference makes
 * the blob a deletion candidate; the sweeper deletes a candidate once it is due (after a grace
 * period, so readers that looked the old metadata up just before a replace still finish) and no
 * reference names it.
 *
 * Writers follow three steps:
 * 1. `put` the content into the blob store;
 * 2. `pin(sha256)`: registers the blob as a candidate due after the grace period, then checks the
 *    blob still exists. From here on a write that never commits (validation, disconnect, database
 *    error, crash) leaves a candidate behind, so its blob is swept; and the pin keeps the sweeper
 *    away while the write proceeds;
 * 3. in the metadata transaction, `addWork(sha256, holder, pin)`: removes the pin and adds the
 *    reference. If the pin is gone (the grace period ran out and the sweeper took it) or the blob
 *    vanished, it throws `BlobGoneError` and the transaction rolls back: the caller answers a
 *    retryable 503.
 *
 * Adding and sweeping exclude each other: on SQLite every write transaction is serialized (one
 * connection; the sweeper's transaction holds the write lock while it deletes the file, and the
 * group-commit writes wait for it). On PostgreSQL both take a transaction-scoped advisory lock on
 * the blob's hash, and the adder checks the blob's row under that lock.
 */

/** The blob named by a reference being added no longer exists (or is being swept): retry the write. */
export class BlobGoneError extends Error {
  readonly code = 'blob_gone';
  constructor(readonly sha256: string) {
    super(`blob ${sha256} was removed while it was being referenced; retry`);
    this.name = 'BlobGoneError';
  }
}

/** The grace period before an unreferenced blob is deleted (in-flight readers of replaced content). */
export const DEFAULT_BLOB_GRACE_MS = 10 * 60_000;
const DEFAULT_SWEEP_INTERVAL_MS = 60_000;
const DEFAULT_SWEEP_BATCH = 500;
// First key of the two-key advisory locks taken on blob hashes (the second is the hash's hashtext).
// Arbitrary, distinct from the migration lock (a single bigint key lives in another key space).
const PG_BLOB_LOCK_CLASS = 0x53544252; // "STBR"

export interface BlobRefsOptions {
  /** Grace period before an unreferenced candidate is deleted; default 10 minutes. */
  graceMs?: number;
  /** How often the background sweeper runs; default every minute. */
  sweepIntervalMs?: number;
  /** Candidates read per sweeper query. */
  batch?: number;
  /**
   * Whether blob existence can be checked in SQL (`stratus_blobs`), inside the adder's
   * transaction. True on PostgreSQL, where the store keeps blobs in the database.
   */
  blobRowsInDatabase?: boolean;
  /** Called when a background sweep fails (it is retried on the next interval). */
  onError?: (error: unknown) => void;
  /** Clock in milliseconds (tests). */
  now?: () => number;
}

/** What `pin` returns and `addWork` consumes: the candidate row that keeps the blob meanwhile. */
export interface BlobPin {
  readonly sha256: string;
  readonly id: number;
}

export class BlobRefs {
  readonly graceMs: number;
  private readonly sweepIntervalMs: number;
  private readonly batch: number;
  private readonly blobRowsInDatabase: boolean;
  private readonly onError: (error: unknown) => void;
  private readonly now: () => number;
  private readonly work: SqlWork;
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<number> | undefined;
  private stopped = true;

  constructor(
    private readonly connection: SqlConnection,
    private readonly blobs: BlobStore,
    options: BlobRefsOptions = {},
  ) {
    this.graceMs = options.graceMs ?? DEFAULT_BLOB_GRACE_MS;
    this.sweepIntervalMs = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
    this.batch = options.batch ?? DEFAULT_SWEEP_BATCH;
    this.blobRowsInDatabase = options.blobRowsInDatabase ?? connection.dialect === 'postgres';
    this.onError = options.onError ?? (() => {});
    this.now = options.now ?? Date.now;
    this.work = new SqlWork(connection);
  }

  /**
   * Step 2 of a write: registers the just-put blob as a candidate due after the grace period and
   * checks that it still exists (a put that deduplicated against an unreferenced blob may have
   * raced a sweep). Throws `BlobGoneError` when it does not.
   */
  async pin(sha256: string): Promise<BlobPin> {
    const id = await this.work.write(() => this.candidateWork(sha256));
    if ((await this.blobs.stat(sha256)) === null) throw new BlobGoneError(sha256);
    return { sha256, id };
  }

  /** Registers a blob as a deletion candidate (it is deleted once due if nothing references it). */
  async markCandidate(sha256: string): Promise<void> {
    await this.work.write(() => this.candidateWork(sha256));
  }

  /**
   * Step 3, inside the caller's write: turns the pin into a reference `(sha256, holder)`.
   * Idempotent for the same holder. Throws `BlobGoneError` (rolling the caller's work back) when
   * the pin was swept or the blob is gone.
   */
  *addWork(pin: BlobPin, holder: string): Work<void> {
    if (this.connection.dialect === 'postgres') yield* this.lockWork(pin.sha256);
    if (this.blobRowsInDatabase) {
      const present = yield* first('select 1 as present from stratus_blobs where sha256 = ?', pin.sha256);
      if (!present) throw new BlobGoneError(pin.sha256);
    }
    const unpinned = yield* run('delete from stratus_blob_candidates where id = ?', pin.id);
    if (unpinned !== 1) {
      // The grace period ran out and a sweep took the pin. That sweep deleted the blob unless a
      // reference kept it; and a referenced blob stays (no reference can go while this write runs).
      const held = yield* first('select 1 as held from stratus_blob_refs where sha256 = ? limit 1', pin.sha256);
      if (!held) throw new BlobGoneError(pin.sha256);
    }
    yield* run('insert into stratus_blob_refs (sha256, holder) values (?, ?) on conflict (sha256, holder) do nothing', pin.sha256, holder);
  }

  /** Inside the caller's write: drops one reference; the blob becomes a candidate. */
  *removeWork(sha256: string, holder: string): Work<void> {
    const removed = yield* run('delete from stratus_blob_refs where sha256 = ? and holder = ?', sha256, holder);
    if (removed > 0) yield* this.candidateWork(sha256);
  }

  /** Inside the caller's write: drops every reference of these holders (e.g. a deleted bucket's files). */
  *removeHoldersWork(holders: readonly string[]): Work<number> {
    let removed = 0;
    const shas = new Set<string>();
    // Bounded IN lists: SQLite allows 32,766 parameters, PostgreSQL 65,535.
    for (let at = 0; at < holders.length; at += 500) {
      const slice = holders.slice(at, at + 500);
      const rows = yield* all<{ sha256: string }>(
        `delete from stratus_blob_refs where holder in (${slice.map(() => '?').join(', ')}) returning sha256`,
        ...slice,
      );
      removed += rows.length;
      for (const row of rows) shas.add(row.sha256);
    }
    for (const sha256 of shas) yield* this.candidateWork(sha256);
    return removed;
  }

  /** How many references name this blob (tests, diagnostics). */
  async countRefs(sha256: string): Promise<number> {
    const row = await this.work.read(() => first<{ n: number | string }>('select count(*) as n from stratus_blob_refs where sha256 = ?', sha256));
    return Number(row?.n ?? 0);
  }

  private *candidateWork(sha256: string): Work<number> {
    const rows = yield* all<{ id: number | string }>('insert into stratus_blob_candidates (sha256, due_at) values (?, ?) returning id', sha256, this.now() + this.graceMs);
    return Number(rows[0]?.id);
  }

  private *lockWork(sha256: string): Work<void> {
    yield* all('select pg_advisory_xact_lock(cast(? as integer), hashtext(?))', PG_BLOB_LOCK_CLASS, sha256);
  }

  /**
   * One sweeper pass over due candidates: a candidate whose blob is referenced, or that has a
   * newer candidate not yet due, is dropped; otherwise the blob is deleted. Returns how many blobs
   * it deleted.
   */
  async sweep(): Promise<number> {
    const now = this.now();
    const due = await this.work.read(() => all<{ sha256: string }>('select sha256 from stratus_blob_candidates where due_at <= ? order by due_at, id limit ?', now, this.batch));
    let deleted = 0;
    for (const sha256 of new Set(due.map((row) => row.sha256))) {
      if (await this.sweepOne(sha256, now)) deleted++;
    }
    return deleted;
  }

  private sweepOne(sha256: string, now: number): Promise<boolean> {
    // A Kysely transaction: on SQLite it holds the single connection (and the write lock) across
    // the blob deletion, so no reference can be added meanwhile; on PostgreSQL the advisory lock does.
    return this.connection.db.transaction().execute(async (trx) => {
      if (this.connection.dialect === 'postgres') {
        await sql`select pg_advisory_xact_lock(${PG_BLOB_LOCK_CLASS}::integer, hashtext(${sha256}))`.execute(trx);
      } else {
        // Take the write lock now rather than at the first write (a deferred transaction).
        await sql`delete from stratus_blob_candidates where 0`.execute(trx);
      }
      const dropDue = () => sql`delete from stratus_blob_candidates where sha256 = ${sha256} and due_at <= ${now}`.execute(trx);
      const referenced = await sql`select 1 from stratus_blob_refs where sha256 = ${sha256} limit 1`.execute(trx);
      const pending = await sql`select 1 from stratus_blob_candidates where sha256 = ${sha256} and due_at > ${now} limit 1`.execute(trx);
      if (referenced.rows.length > 0 || pending.rows.length > 0) {
        await dropDue();
        return false;
      }
      const existed = await this.blobs.delete(sha256);
      await dropDue();
      return existed;
    });
  }

  /** Starts the background sweeper (unref'd: it never keeps the process alive). */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule();
  }

  /** Stops the sweeper and waits for a pass in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.sweeping?.catch(() => 0);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.sweeping = this.sweep();
      this.sweeping
        .catch((error: unknown) => this.onError(error))
        .finally(() => {
          this.sweeping = undefined;
          this.schedule();
        });
    }, this.sweepIntervalMs);
    this.timer.unref();
  }
}
