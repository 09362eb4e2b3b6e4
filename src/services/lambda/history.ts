import type { SqlConnection } from '../../store/db.ts';
import { all, run } from '../../store/sql-work.ts';
import type { SqlColumn, SqlDatabase } from '../../store/sql/types.ts';
import type { LogLine } from './runtime/sandbox.ts';

/**
 * What started an invocation (README: Invocation history and logs): `invoke` the owner's test
 * run, `http` the public `/run/{id}`, `run` the owner's `/api/v0/run/{id}`, `mux` the owner's
 * router, `project` a project host, `cron` a tick of the lambda's schedule, `task` a scheduler's
 * task delivered to it.
 */
export const INVOCATION_TRIGGERS = ['invoke', 'http', 'run', 'mux', 'project', 'cron', 'task'] as const;
export type InvocationTrigger = (typeof INVOCATION_TRIGGERS)[number];

/** One finished invocation, as `Invoker.execute` hands it to the recorder. */
export interface InvocationRecord {
  /** The invocation id (the one `/ongoing` lists and the server log names). */
  id: string;
  lambda_id: string;
  owner: string;
  /** RFC 3339, when the run got its slot (as `/ongoing` shows it). */
  started_at: string;
  duration_ms: number;
  trigger: InvocationTrigger;
  /** The HTTP status answered: 200 for a JSON or text answer, a Response's own, 500 for an error. */
  status: number;
  /** Null on success; else the runtime's code (`lambda_error`, `lambda_timeout`, …) and message. */
  error_code: string | null;
  error_message: string | null;
  /** The console lines of the run, as given (already redacted by whoever produced them). */
  logs: LogLine[];
  /** Outbound fetch requests the run made; 0 when absent. */
  fetches?: number;
  /** Platform binding calls the run made; 0 when absent. */
  bindings?: number;
}

/** Characters of console lines and messages the waiting entries may hold together (beyond: dropped). */
const MAX_PENDING_CHARS = 32 * 1024 * 1024;

/** What an entry holds in memory, roughly: its console lines, its message and a fixed part. */
function sizeOf(entry: InvocationRecord): number {
  let chars = 256 + (entry.error_message?.length ?? 0);
  for (const line of entry.logs) chars += line.message.length + 16;
  return chars;
}

/** Where `Invoker.execute` records each finished invocation (InvocationHistory). */
export interface InvocationRecorder {
  /** Queues the record; never throws and never waits. */
  record(entry: InvocationRecord): void;
}

/** An invocation as `GET /api/v0/lambdas/{id}/invocations` answers it. */
export interface InvocationItem {
  id: string;
  lambda_id: string;
  started_at: string;
  duration_ms: number;
  trigger: InvocationTrigger;
  status: number;
  error: { code: string; message: string } | null;
  logs: LogLine[];
  fetches: number;
  bindings: number;
}

/** Something went wrong off the request path; `context` never holds console lines or messages. */
export type HistoryWarning = (context: Record<string, unknown>, message: string) => void;

export interface HistoryOptions {
  /** Invocations kept per lambda (settings.lambdaInvocationHistory): older ones are deleted. */
  keep: number;
  /** At most this long after an invocation ends, its entry is written (default 500 ms). */
  flushMs?: number;
  /** A batch is written at once when this many entries wait, and holds at most this many (default 200). */
  maxBatch?: number;
  /** Entries waiting beyond this many (the database slow or down) are dropped (default 10,000). */
  maxPending?: number;
}

/** The bound columns of a batch, in the insert's order (`SqlSyntax.rowSources`). */
const BATCH_COLUMNS: readonly SqlColumn[] = [
  { name: 'n', type: 'bigint' },
  { name: 'id', type: 'text' },
  { name: 'lambda_id', type: 'text' },
  { name: 'owner', type: 'text' },
  { name: 'started_at', type: 'text' },
  // Bound as text (rowSources has no floating-point type) and cast in the select.
  { name: 'duration_ms', type: 'text' },
  { name: 'trigger', type: 'text' },
  { name: 'status', type: 'bigint' },
  { name: 'error_code', type: 'text' },
  { name: 'error_message', type: 'text' },
  { name: 'logs', type: 'text' },
  { name: 'fetches', type: 'bigint' },
  { name: 'bindings', type: 'bigint' },
];

interface Row {
  id: string;
  lambda_id: string;
  started_at: string;
  duration_ms: number | string;
  trigger: string;
  status: number | string;
  error_code: string | null;
  error_message: string | null;
  logs: string;
  fetches: number | string;
  bindings: number | string;
}

function item(row: Row): InvocationItem {
  let logs: LogLine[];
  try {
    logs = JSON.parse(row.logs) as LogLine[];
  } catch {
    logs = [];
  }
  return {
    id: row.id,
    lambda_id: row.lambda_id,
    started_at: row.started_at,
    duration_ms: Number(row.duration_ms),
    trigger: row.trigger as InvocationTrigger,
    status: Number(row.status),
    error: row.error_code === null ? null : { code: row.error_code, message: row.error_message ?? '' },
    logs,
    fetches: Number(row.fetches),
    bindings: Number(row.bindings),
  };
}

/** A count the runtime reports, or 0 when it reports none (or something that is not a count). */
function count(value: number | undefined): number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : 0;
}

/**
 * The invocation history of every lambda (README: Invocation history and logs). `record` costs
 * the invocation path an array push: entries wait in memory and are written in batches off the
 * request path — at most `flushMs` after the first one waits, at once when `maxBatch` wait — one
 * batch at a time, each one multi-row insert and the touched lambdas trimmed to their newest
 * `keep` rows in one write transaction. No more than `keep` entries of a lambda wait: an older
 * one would only be trimmed. A batch that fails is reported and dropped;
 * nothing is ever thrown at a request. `list` writes what waits first, so a caller sees its own
 * invocations on this instance at once; `close` writes what waits.
 */
export class InvocationHistory implements InvocationRecorder {
  private readonly database: SqlDatabase;
  private readonly keep: number;
  private readonly flushMs: number;
  private readonly maxBatch: number;
  private readonly maxPending: number;
  private pending: InvocationRecord[] = [];
  /** Characters the waiting entries hold (their console lines and messages), bounded by MAX_PENDING_CHARS. */
  private pendingChars = 0;
  /** How many entries of each lambda wait (at most `keep`). */
  private readonly waitingOf = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private draining: Promise<void> | undefined;
  /**
   * The entries at the front of `pending` a drain is to write besides full batches: those that
   * waited when a flush (a read, close, the delay run out) asked for it. Entries that arrive while
   * it writes wait for their own delay: writing them at once would make a steady stream commit
   * (an fsync on SQLite) once per write's worth of entries, tens of times a second.
   */
  private owed = 0;
  /** Entries dropped since the last report (too many waiting). */
  private dropped = 0;
  private closed = false;

  constructor(
    connection: SqlConnection,
    private readonly warn: HistoryWarning,
    options: HistoryOptions,
  ) {
    this.database = connection.database;
    this.keep = options.keep;
    this.flushMs = options.flushMs ?? 500;
    this.maxBatch = options.maxBatch ?? 200;
    this.maxPending = options.maxPending ?? 10_000;
  }

  /** Invocations kept per lambda. */
  get retention(): number {
    return this.keep;
  }

  /** Entries waiting to be written (for tests and metrics). */
  get waiting(): number {
    return this.pending.length;
  }

  /** Queues one finished invocation; never throws, never waits. */
  record(entry: InvocationRecord): void {
    if (this.closed) return;
    const chars = sizeOf(entry);
    if (this.pending.length >= this.maxPending || this.pendingChars + chars > MAX_PENDING_CHARS) {
      this.dropped += 1;
      return;
    }
    // A lambda keeps its newest `keep` runs: an older one still waiting would be trimmed as soon as
    // it was written, so it is not written at all (a busy lambda costs `keep` rows a batch at most).
    const waiting = (this.waitingOf.get(entry.lambda_id) ?? 0) + 1;
    if (waiting > this.keep) {
      const oldest = this.pending.findIndex((other) => other.lambda_id === entry.lambda_id);
      this.pendingChars -= sizeOf(this.pending[oldest]!);
      this.pending.splice(oldest, 1);
      if (oldest < this.owed) this.owed -= 1;
    } else this.waitingOf.set(entry.lambda_id, waiting);
    this.pending.push(entry);
    this.pendingChars += chars;
    if (this.pending.length >= this.maxBatch) void this.drain(false);
    // Within `flushMs` of its arrival, even while a drain writes what waited before it.
    else this.schedule();
  }

  /** Writes everything waiting now; never rejects. */
  flush(): Promise<void> {
    return this.drain();
  }

  /** The lambda's newest invocations, newest first, after writing what waits on this instance. */
  async list(lambdaId: string, limit: number): Promise<InvocationItem[]> {
    await this.flush();
    const rows = await this.database.read(() =>
      all<Row>(
        `select id, lambda_id, started_at, duration_ms, trigger, status, error_code, error_message, logs, fetches, bindings
          from lambda_invocations where lambda_id = ? order by seq desc limit ?`,
        lambdaId,
        Math.min(limit, this.keep),
      ),
    );
    return rows.map(item);
  }

  /**
   * Forgets a deleted lambda: its waiting entries and its rows. Call it after the lambda's row is
   * gone; a batch then inserts nothing more for it (the insert keeps only existing lambdas).
   */
  async deleteOf(lambdaId: string): Promise<void> {
    this.owed = this.pending.slice(0, this.owed).filter((entry) => entry.lambda_id !== lambdaId).length;
    this.pending = this.pending.filter((entry) => entry.lambda_id !== lambdaId);
    this.pendingChars = this.pending.reduce((n, entry) => n + sizeOf(entry), 0);
    this.waitingOf.delete(lambdaId);
    await this.draining;
    await this.database.write(() => run('delete from lambda_invocations where lambda_id = ?', lambdaId));
  }

  /** Writes what waits, including what arrives meanwhile, and takes no more entries. */
  async close(): Promise<void> {
    do await this.drain();
    while (this.pending.length > 0);
    this.closed = true;
  }

  /**
   * Writes full batches while there are, and with `whole` (a flush, a read, close, the delay run
   * out) everything waiting at the time; one drain at a time, joined by later callers. What is
   * left waits for the delay: under a steady stream, writing each remainder at once would make a
   * transaction (and a commit) per few entries.
   */
  private drain(whole = true): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (whole) this.owed = this.pending.length;
    if (this.draining) return this.draining;
    let settle!: () => void;
    const draining = new Promise<void>((resolve) => (settle = resolve));
    this.draining = draining;
    void (async () => {
      try {
        // `owed` is read again after each write: a flush asked for meanwhile is honoured here.
        while (this.pending.length >= this.maxBatch || this.owed > 0) {
          const batch = this.pending.splice(0, this.maxBatch);
          this.owed = Math.max(0, this.owed - batch.length);
          for (const entry of batch) {
            this.pendingChars -= sizeOf(entry);
            const left = (this.waitingOf.get(entry.lambda_id) ?? 1) - 1;
            if (left > 0) this.waitingOf.set(entry.lambda_id, left);
            else this.waitingOf.delete(entry.lambda_id);
          }
          await this.write(batch);
        }
        if (this.dropped > 0) {
          this.warn(
            { dropped: this.dropped, waiting_at_most: this.maxPending },
            'lambda invocation history: entries dropped, too many waited to be written',
          );
          this.dropped = 0;
        }
      } finally {
        this.owed = 0;
        this.draining = undefined;
        // In the turn the loop ended: what arrived meanwhile waits for the delay.
        if (this.pending.length > 0) this.schedule();
        settle();
      }
    })();
    return draining;
  }

  /** Writes what waits after the delay, unless that is already planned. */
  private schedule(): void {
    if (this.timer !== undefined || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.drain();
    }, this.flushMs);
    this.timer.unref();
  }

  /** One batch: one insert in one write, then the touched lambdas trimmed. Failures are reported, not thrown. */
  private async write(batch: readonly InvocationRecord[]): Promise<void> {
    const { syntax } = this.database;
    const rows = batch.map((entry, n) => [
      n,
      entry.id,
      entry.lambda_id,
      entry.owner,
      entry.started_at,
      String(entry.duration_ms),
      entry.trigger,
      entry.status,
      entry.error_code,
      // PostgreSQL text holds no NUL (SQLite would): one would fail the whole batch.
      entry.error_message === null ? null : entry.error_message.replaceAll('\u0000', '\ufffd'),
      JSON.stringify(entry.logs),
      count(entry.fetches),
      count(entry.bindings),
    ]);
    const lambdas = [...new Set(batch.map((entry) => entry.lambda_id))].sort();
    const keep = this.keep;
    try {
      // One write (one commit on PostgreSQL): the rows, then the touched lambdas trimmed.
      await this.database.write(function* () {
        for (const { source, params } of syntax.rowSources(BATCH_COLUMNS, rows))
          // Only lambdas that still exist (a share lock on PostgreSQL orders this against a
          // concurrent delete, which then finds these rows): a deleted lambda leaves no history.
          yield* run(
            `insert into lambda_invocations
              (id, lambda_id, owner, started_at, duration_ms, trigger, status, error_code, error_message, logs, fetches, bindings)
              select v.id, v.lambda_id, v.owner, v.started_at, cast(v.duration_ms as double precision), v.trigger, v.status,
                v.error_code, v.error_message, v.logs, v.fetches, v.bindings
              from ${source}
              where exists (select 1 from lambda_functions f where f.id = v.lambda_id${syntax.forShare})
              order by v.n`,
            ...params,
          );
        for (const lambdaId of lambdas)
          yield* run(
            `delete from lambda_invocations where lambda_id = ? and seq <= (
              select seq from lambda_invocations where lambda_id = ? order by seq desc limit 1 offset ?)`,
            lambdaId,
            lambdaId,
            keep,
          );
      });
    } catch (error) {
      this.warn(
        { error: (error as Error).message, entries: batch.length, lambdas: lambdas.length },
        'lambda invocation history: a batch could not be written and was dropped',
      );
    }
  }
}
