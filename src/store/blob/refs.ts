import type { SqlConnection } from '../db.ts';
import { all, first, run, type Work } from '../sql-work.ts';
import type { NamedLock, SqlColumn, SqlDatabase } from '../sql/types.ts';
import type { BlobInfo, BlobStore } from './types.ts';

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
 * Deleting a blob takes three steps too, and no transaction is held open while the blob store
 * works (a SQLite write transaction would stop every other write of the platform meanwhile):
 * (a) one write decides: the blob is unreferenced and has no candidate still in its grace period,
 *     so its due candidates go and a tombstone row (`stratus_blob_doomed`) takes their place;
 * (b) the blob is deleted from the blob store, outside any transaction;
 * (c) a second write removes the tombstone.
 * While the tombstone exists the hash is off limits: `pin` waits for it to go (and then finds the
 * blob gone unless it was put again), `addWork` refuses it. Every write that decides about one
 * hash (the sweeper's decision, a pin, adding a reference) takes the port's `lockName` on the hash
 * first: on PostgreSQL an advisory transaction lock, on SQLite nothing, since its writes are one
 * at a time already. A tombstone whose sweeper died between (a) and (c) is finished by a later
 * sweep: at once on SQLite (this process is the only writer, so a tombstone no sweeper of this
 * process is working on has none), after `STALE_TOMBSTONE_MS` on PostgreSQL (another instance may
 * still be deleting the blob).
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
/**
 * Where other instances write too (PostgreSQL), a tombstone this old is taken to be left by a
 * sweeper that died between its two writes; a later sweep finishes it. Deleting one blob takes far
 * less.
 */
export const STALE_TOMBSTONE_MS = 60_000;
/** How long `pin` waits for a tombstone of its hash to go before it gives up with `BlobGoneError`. */
const PIN_WAIT_MS = 2_000;
const PIN_POLL_MS = 10;
// The lock space (`lockName`) of the locks taken on blob hashes. Arbitrary, distinct from the other
// spaces of the platform.
const BLOB_LOCK_SPACE = 0x53544252; // "STBR"

/**
 * The hashes whose tombstone a sweeper of this process is working on, per database: a tombstone
 * is only ever finished by another sweeper when no sweeper of this process has it (several
 * services each run a sweeper over the same tables).
 */
const sweepingHere = new WeakMap<SqlDatabase, Set<string>>();

function sweepingIn(database: SqlDatabase): Set<string> {
  let shas = sweepingHere.get(database);
  if (!shas) {
    shas = new Set();
    sweepingHere.set(database, shas);
  }
  return shas;
}

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

/** A batch of references refused as a whole: the caller adds them one by one instead (`addManyWork`). */
export class BatchRefused extends Error {
  constructor(reason: string) {
    super(`batch refused: ${reason}`);
    this.name = 'BatchRefused';
  }
}

const ADD_COLUMNS: readonly SqlColumn[] = [
  { name: 'n', type: 'bigint' },
  { name: 'sha256', type: 'text' },
  { name: 'candidate', type: 'bigint' },
  { name: 'holder', type: 'text' },
];

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
  private readonly database: SqlDatabase;
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<number> | undefined;
  private stopped = true;

  constructor(
    connection: SqlConnection,
    private readonly blobs: BlobStore,
    options: BlobRefsOptions = {},
  ) {
    this.graceMs = options.graceMs ?? DEFAULT_BLOB_GRACE_MS;
    this.sweepIntervalMs = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
    this.batch = options.batch ?? DEFAULT_SWEEP_BATCH;
    this.blobRowsInDatabase = options.blobRowsInDatabase ?? connection.dialect === 'postgres';
    this.onError = options.onError ?? (() => {});
    this.now = options.now ?? Date.now;
    this.database = connection.database;
  }

  /**
   * Step 2 of a write: registers the just-put blob as a candidate due after the grace period and
   * checks that it still exists (a put that deduplicated against an unreferenced blob may have
   * raced a sweep). While the blob is being deleted (a tombstone) it waits for the deletion to
   * end, up to about two seconds. Throws `BlobGoneError` when the blob does not exist (or the
   * deletion does not end in time).
   */
  async pin(sha256: string): Promise<BlobPin> {
    const deadline = performance.now() + PIN_WAIT_MS;
    let id = await this.database.write(() => this.pinWork(sha256));
    while (id === null) {
      // Doomed: wait until the sweeper has deleted the blob and removed the tombstone.
      do {
        if (performance.now() >= deadline) throw new BlobGoneError(sha256);
        await new Promise((resolve) => setTimeout(resolve, PIN_POLL_MS));
      } while (await this.database.read(() => this.doomedWork(sha256)));
      id = await this.database.write(() => this.pinWork(sha256));
    }
    if ((await this.blobs.stat(sha256)) === null) throw new BlobGoneError(sha256);
    return { sha256, id };
  }

  /** What a put passes as `candidateDueAt` so that new content comes back pinned (`pinPut`). */
  candidateDueAt(): number {
    return this.now() + this.graceMs;
  }

  /**
   * Step 2 after a put made with `candidateDueAt`: the candidate the put registered with new
   * content (one statement fewer than six), else `pin`.
   */
  async pinPut(info: BlobInfo): Promise<BlobPin> {
    return info.candidate === undefined ? this.pin(info.sha256) : { sha256: info.sha256, id: info.candidate };
  }

  /** The pin's write: a candidate, or null (nothing written) while the blob is doomed. */
  private *pinWork(sha256: string): Work<number | null> {
    yield* this.database.lockName(BLOB_LOCK_SPACE, sha256);
    if (yield* this.doomedWork(sha256)) return null;
    return yield* this.candidateWork(sha256);
  }

  /** Registers a blob as a deletion candidate (it is deleted once due if nothing references it). */
  async markCandidate(sha256: string): Promise<void> {
    await this.database.write(() => this.candidateWork(sha256));
  }

  /** The lock `addWork` takes on a pin's hash, for a caller that takes it together with its own (`lockNames`). */
  lockOf(sha256: string): NamedLock {
    return { space: BLOB_LOCK_SPACE, name: sha256 };
  }

  /**
   * Step 3, inside the caller's write: turns the pin into a reference `(sha256, holder)`.
   * Idempotent for the same holder. Throws `BlobGoneError` (rolling the caller's work back) when
   * the pin was swept or the blob is gone or being deleted. `locked`: the caller has taken
   * `lockOf(pin.sha256)` in this write already.
   */
  *addWork(pin: BlobPin, holder: string, options: { locked?: boolean } = {}): Work<void> {
    if (!options.locked) yield* this.database.lockName(BLOB_LOCK_SPACE, pin.sha256);
    if (this.blobRowsInDatabase) {
      // PostgreSQL: the checks, the unpinning and the reference in one statement.
      const [outcome] = yield* this.addRowsWork([{ pin, holder }]);
      // Without its pin the blob is safe only if it was referenced already: by this holder (then
      // nothing was added) or by another.
      if (!outcome!.unpinned && outcome!.added) yield* this.heldElsewhereWork(pin.sha256, holder);
      return;
    }
    if (yield* this.doomedWork(pin.sha256)) throw new BlobGoneError(pin.sha256);
    const unpinned = yield* run('delete from stratus_blob_candidates where id = ?', pin.id);
    if (unpinned !== 1) yield* this.heldElsewhereWork(pin.sha256);
    yield* run(
      'insert into stratus_blob_refs (sha256, holder) values (?, ?) on conflict (sha256, holder) do nothing',
      pin.sha256,
      holder,
    );
  }

  /**
   * The pin was gone: the grace period ran out and a sweep took it. That sweep deleted the blob
   * unless a reference kept it, and a referenced blob stays (no reference can go while this write
   * runs). Throws `BlobGoneError` unless a holder (other than `except`, one just added) references it.
   */
  private *heldElsewhereWork(sha256: string, except?: string): Work<void> {
    const held = yield* first(
      except === undefined
        ? 'select 1 as held from stratus_blob_refs where sha256 = ? limit 1'
        : 'select 1 as held from stratus_blob_refs where sha256 = ? and holder <> ? limit 1',
      sha256,
      ...(except === undefined ? [] : [except]),
    );
    if (!held) throw new BlobGoneError(sha256);
  }

  /**
   * `addWork` for several pins at once, inside the caller's write, on a store whose blob rows are
   * in the database (`blobRowsInDatabase`; the caller has taken every `lockOf`): one statement for
   * all of them. Throws `BlobGoneError` for the first pin that `addWork` would refuse, and
   * `BatchRefused` where it would have had to look further (a pin swept meanwhile), so that the
   * caller redoes the items one by one.
   */
  *addManyWork(adds: readonly { pin: BlobPin; holder: string }[]): Work<void> {
    if (!this.blobRowsInDatabase)
      throw new BatchRefused('references are added in one statement only where blob rows are in the database');
    for (const outcome of yield* this.addRowsWork(adds))
      if (!outcome.unpinned && outcome.added) throw new BatchRefused('a pin was swept before its reference');
  }

  /**
   * The statement of `addWork` and `addManyWork` (PostgreSQL): for each pin, on one snapshot
   * taken after the locks, whether its blob is usable, and if so the pin removed and the reference
   * added. Throws `BlobGoneError` for the first pin whose blob is being deleted or gone; otherwise
   * answers, in order, whether each pin was still there and whether its reference is new.
   */
  private *addRowsWork(
    adds: readonly { pin: BlobPin; holder: string }[],
  ): Work<{ unpinned: boolean; added: boolean }[]> {
    const answers: { unpinned: boolean; added: boolean }[] = [];
    const rows = adds.map((add, n) => [n, add.pin.sha256, add.pin.id, add.holder]);
    for (const { source, params } of this.database.syntax.rowSources(ADD_COLUMNS, rows)) {
      const outcomes = yield* all<{
        n: number | string;
        doomed: boolean;
        present: boolean;
        unpinned: boolean;
        added: boolean;
      }>(
        `with state as (
           select v.n, v.sha256, v.candidate, v.holder,
                  exists (select 1 from stratus_blob_doomed d where d.sha256 = v.sha256) as doomed,
                  exists (select 1 from stratus_blobs b where b.sha256 = v.sha256) as present
           from ${source}
         ),
         usable as (select * from state where not doomed and present),
         unpinned as (
           delete from stratus_blob_candidates c using usable u where c.id = u.candidate returning c.id
         ),
         added as (
           insert into stratus_blob_refs (sha256, holder) select sha256, holder from usable
           on conflict (sha256, holder) do nothing returning sha256, holder
         )
         select s.n, s.doomed, s.present,
                exists (select 1 from unpinned p where p.id = s.candidate) as unpinned,
                exists (select 1 from added a where a.sha256 = s.sha256 and a.holder = s.holder) as added
         from state s order by s.n`,
        ...params,
      );
      for (const outcome of outcomes) {
        if (outcome.doomed || !outcome.present) throw new BlobGoneError(adds[Number(outcome.n)]!.pin.sha256);
        answers.push({ unpinned: outcome.unpinned, added: outcome.added });
      }
    }
    return answers;
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
    const row = await this.database.read(() =>
      first<{ n: number | string }>('select count(*) as n from stratus_blob_refs where sha256 = ?', sha256),
    );
    return Number(row?.n ?? 0);
  }

  private *candidateWork(sha256: string): Work<number> {
    const rows = yield* all<{ id: number | string }>(
      'insert into stratus_blob_candidates (sha256, due_at) values (?, ?) returning id',
      sha256,
      this.now() + this.graceMs,
    );
    return Number(rows[0]?.id);
  }

  private *doomedWork(sha256: string): Work<boolean> {
    return (yield* first('select 1 as doomed from stratus_blob_doomed where sha256 = ?', sha256)) !== undefined;
  }

  /**
   * One sweeper pass: first the tombstones left by sweepers that died mid-deletion, then the due
   * candidates: a candidate whose blob is referenced, or that has a newer candidate not yet due,
   * is dropped; otherwise the blob is deleted. Returns how many blobs it deleted.
   */
  async sweep(): Promise<number> {
    const now = this.now();
    let deleted = 0;
    const tombstones = await this.database.read(() =>
      all<{ sha256: string; since_ms: number | string }>(
        'select sha256, since_ms from stratus_blob_doomed order by since_ms limit ?',
        this.batch,
      ),
    );
    const here = sweepingIn(this.database);
    for (const { sha256, since_ms } of tombstones) {
      if (here.has(sha256) || !this.abandoned(Number(since_ms), now)) continue;
      if (await this.sweepOne(sha256, now, true)) deleted++;
    }
    const due = await this.database.read(() =>
      all<{ sha256: string }>(
        'select sha256 from stratus_blob_candidates where due_at <= ? order by due_at, id limit ?',
        now,
        this.batch,
      ),
    );
    for (const sha256 of new Set(due.map((row) => row.sha256))) {
      if (await this.sweepOne(sha256, now, false)) deleted++;
    }
    return deleted;
  }

  /**
   * Whether a tombstone no sweeper of this process is working on has been left by a dead one: on a
   * database this process alone writes, always; elsewhere once it is `STALE_TOMBSTONE_MS` old.
   */
  private abandoned(sinceMs: number, now: number): boolean {
    return this.database.soleWriter || sinceMs <= now - STALE_TOMBSTONE_MS;
  }

  /** Decides on one hash and, when it is doomed, deletes its blob. Returns whether a blob was deleted. */
  private async sweepOne(sha256: string, now: number, tombstoneOnly: boolean): Promise<boolean> {
    const here = sweepingIn(this.database);
    // Another sweeper of this process is deleting this blob: its tombstone keeps everyone away.
    if (here.has(sha256)) return false;
    here.add(sha256);
    try {
      // (a) The decision, in one write.
      if (!(await this.database.write(() => this.doomWork(sha256, now, tombstoneOnly)))) return false;
      // (b) The deletion, outside any transaction: idempotent, so a tombstone taken over from a
      // dead sweeper is finished the same way.
      const existed = await this.blobs.delete(sha256);
      // (c) The hash is usable again. Should this write (or the deletion) fail, the tombstone stays
      // and a later sweep finishes it.
      await this.database.write(() => run('delete from stratus_blob_doomed where sha256 = ?', sha256));
      return existed;
    } finally {
      here.delete(sha256);
    }
  }

  /**
   * The sweeper's decision on one hash (the caller has marked it as worked on here). Drops the due
   * candidates; true when the blob is to be deleted now: unreferenced and without a candidate in
   * its grace period (a tombstone is written), or doomed by a sweeper that died (its tombstone is
   * taken over). False when it stays, or when a live sweeper elsewhere is deleting it. With
   * `tombstoneOnly` (the recovery pass) a hash without a tombstone is left alone.
   */
  private *doomWork(sha256: string, now: number, tombstoneOnly: boolean): Work<boolean> {
    yield* this.database.lockName(BLOB_LOCK_SPACE, sha256);
    const tombstone = yield* first<{ since_ms: number | string }>(
      'select since_ms from stratus_blob_doomed where sha256 = ?',
      sha256,
    );
    if (!tombstone && tombstoneOnly) return false;
    yield* run('delete from stratus_blob_candidates where sha256 = ? and due_at <= ?', sha256, now);
    if (tombstone) {
      if (!this.abandoned(Number(tombstone.since_ms), now)) return false;
      yield* run('update stratus_blob_doomed set since_ms = ? where sha256 = ?', this.now(), sha256);
      return true;
    }
    const referenced = yield* first('select 1 as referenced from stratus_blob_refs where sha256 = ? limit 1', sha256);
    if (referenced) return false;
    const pending = yield* first(
      'select 1 as pending from stratus_blob_candidates where sha256 = ? and due_at > ? limit 1',
      sha256,
      now,
    );
    if (pending) return false;
    yield* run('insert into stratus_blob_doomed (sha256, since_ms) values (?, ?)', sha256, this.now());
    return true;
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
