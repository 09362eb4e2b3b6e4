import { randomUUID } from 'node:crypto';
import { Pacer } from '../../core/pacer.ts';
import type { SqlConnection } from '../../store/db.ts';
// The generator executor is docdb's: one statement list for SQLite (synchronous, group commit)
// and PostgreSQL (async transaction). It has no docdb-specific logic.
import { all, first, run, type Work } from '../../store/sql-work.ts';
import type { SqlColumn, SqlDatabase } from '../../store/sql/types.ts';
import { GroupCommit, togetherThenAlone, type Settled } from '../../store/group-commit.ts';
import { MAX_TIME_MS } from './time.ts';

export interface SchedulerRow {
  id: string;
  display_name: string;
  created_ms: number;
  updated_ms: number;
  /** The delivery target as stored (JSON), null when none (README: Delivery). */
  target: string | null;
  /** The retry policy as stored (JSON), null for the defaults. */
  retry: string | null;
  total: number;
  inflight: number;
}

/** A scheduler with a delivery target, as the delivery engine reads it. */
export interface TargetedScheduler {
  id: string;
  target: string;
  retry: string | null;
}

/** A task claimed by the platform for delivery: `attempts` counts this delivery. */
export interface DeliveryClaim {
  id: string;
  payload: string;
  labels: string;
  lease_id: string;
  attempts: number;
}

export interface DeadTask {
  id: string;
  payload: string;
  labels: string;
  attempts: number;
  last_error: string | null;
  failed_ms: number;
}

export type DeadRetryOutcome = 'done' | 'not_found' | 'task_not_found' | 'exists';

export interface Counts {
  scheduled: number;
  inflight: number;
}

export interface TaskFilter {
  search?: string;
  labels: string[];
}

export interface Page {
  page: number;
  perPage: number;
}

export interface ListedTask {
  id: string;
  due_ms: number;
  labels: string;
  /** Deliveries so far (platform deliveries only) and the last one's error. */
  attempts: number;
  last_error: string | null;
}

export interface TaskPages {
  scheduled: ListedTask[];
  inflight: ListedTask[];
  scheduledTotal: number;
  inflightTotal: number;
}

export interface Claimed {
  id: string;
  payload: string;
  labels: string;
  due_ms: number;
  lease_id: string;
}

export type EnqueueOutcome = 'created' | 'exists' | 'not_found';

interface ClaimCall {
  schedulerId: string;
  now: number;
  worktimeMs: number;
  leaseId: string;
}

interface AcknowledgeCall {
  schedulerId: string;
  taskId: string;
  leaseId: string;
  now: number;
}

interface TaskToEnqueue {
  schedulerId: string;
  id: string;
  payload: string;
  labels: string;
  due: number;
}

/** A task's identity within the platform: its scheduler and its id. */
const taskKey = (schedulerId: string, id: string) => `${schedulerId}\u0000${id}`;

const TASK_COLUMNS: readonly SqlColumn[] = [
  { name: 'n', type: 'bigint' },
  { name: 'scheduler_id', type: 'text' },
  { name: 'id', type: 'text' },
  { name: 'payload', type: 'text' },
  { name: 'labels', type: 'text' },
  { name: 'due_ms', type: 'bigint' },
];

export type AckOutcome = 'done' | 'task_not_found' | 'lease_mismatch' | 'not_found';
export type ExtendOutcome = { expires: number } | 'task_not_found' | 'lease_mismatch' | 'conflict' | 'not_found';
export type RescheduleOutcome = 'done' | 'task_not_found' | 'task_in_flight' | 'not_found';

const SCHEDULER_COLUMNS = `s.id, s.display_name, s.created_ms, s.updated_ms, s.target, s.retry,
  (select count(*) from scheduler_tasks t where t.scheduler_id = s.id) as total,
  (select count(*) from scheduler_tasks t where t.scheduler_id = s.id and t.lease_id is not null and t.due_ms > ?) as inflight`;

/*
 * On SQLite every query runs on the event loop, so work that grows with a scheduler's tasks is
 * done in slices with a turn for the event loop between them: counts and pages in windows of
 * `windows.count` sequence numbers, `search`/`label` filters over windows of at most `windows.searchBytes`
 * of payload and labels, tested with JavaScript's linear-time substring search. A listing read in
 * slices may show a change made while it runs in one slice and not another. On PostgreSQL the
 * queries run in the database server and stay single statements.
 */
export interface WindowSizes {
  /** Sequence numbers per counting window. */
  count: number;
  /** Bytes of payload and labels per search window (a larger task is a window of its own). */
  searchBytes: number;
  /** Tasks sized per query while cutting search windows. */
  probeRows: number;
}
const WINDOWS: WindowSizes = { count: 32_768, searchBytes: 1024 * 1024, probeRows: 1024 };
const INFLIGHT = 'lease_id is not null and due_ms > ?';
const SCHEDULED = '(lease_id is null or due_ms <= ?)';

const CLAIM_COLUMNS: readonly SqlColumn[] = [
  { name: 'n', type: 'bigint' },
  { name: 'lease_id', type: 'text' },
  { name: 'expires', type: 'bigint' },
];

const LEASE_COLUMNS: readonly SqlColumn[] = [
  { name: 'id', type: 'text' },
  { name: 'lease_id', type: 'text' },
];

/**
 * The claim of `claimMany`: the `limit ?` earliest due tasks, numbered 1… in the order one claim
 * after another would take them, leased under the lease of the same number in `source` (`v`).
 */
const claimManyText = (source: string, forUpdateSkipLocked: string) =>
  `update scheduler_tasks set lease_id = v.lease_id, due_ms = v.expires from (select seq, row_number() over (order by due_ms, seq) as n from (select seq, due_ms from scheduler_tasks where scheduler_id = ? and due_ms <= ? order by due_ms, seq limit ?${forUpdateSkipLocked}) as due) as picked join ${source} on v.n = picked.n where scheduler_tasks.seq = picked.seq returning v.n, scheduler_tasks.id, scheduler_tasks.payload, scheduler_tasks.labels, scheduler_tasks.due_ms`;

/** The acknowledge of `acknowledgeMany`: each task of `source` (`v`) under its own lease, unexpired. */
const acknowledgeManyText = (source: string) =>
  `delete from scheduler_tasks where scheduler_id = ? and due_ms > ? and (id, lease_id) in (select v.id, v.lease_id from ${source}) returning id`;

/** The insert of `enqueueMany` over one row source of TASK_COLUMNS (`v`). */
const enqueueText = (source: string, forShare: string) =>
  `insert into scheduler_tasks (scheduler_id, id, payload, labels, due_ms) select v.scheduler_id, v.id, v.payload, v.labels, v.due_ms from ${source} where exists (select 1 from scheduler_schedulers s where s.id = v.scheduler_id${forShare}) order by v.n on conflict (scheduler_id, id) do nothing returning scheduler_id, id`;

/** The statements of every reserve, acknowledge and delivery, in this database's syntax. */
function hotStatements({ forUpdateSkipLocked, forShare }: SqlDatabase['syntax']) {
  const claimed = `where seq = (select seq from scheduler_tasks where scheduler_id = ? and due_ms <= ? order by due_ms, seq limit 1${forUpdateSkipLocked})`;
  return {
    claim: `update scheduler_tasks set lease_id = ?, due_ms = ? ${claimed} returning id, payload, labels, due_ms`,
    claimForDelivery: `update scheduler_tasks set lease_id = ?, due_ms = ?, attempts = attempts + 1 ${claimed} returning id, payload, labels, attempts`,
    acknowledge: 'delete from scheduler_tasks where scheduler_id = ? and id = ?',
    acknowledgeLeased: 'delete from scheduler_tasks where scheduler_id = ? and id = ? and lease_id = ? and due_ms > ?',
    deliveryDone: 'delete from scheduler_tasks where scheduler_id = ? and id = ? and lease_id = ?',
    nextDue: 'select due_ms from scheduler_tasks where scheduler_id = ? and due_ms > ? order by due_ms limit 1',
    exists: 'select 1 as one from scheduler_schedulers where id = ?',
    enqueueOne: `insert into scheduler_tasks (scheduler_id, id, payload, labels, due_ms) select ?, ?, ?, ?, ? where exists (select 1 from scheduler_schedulers where id = ?${forShare})`,
  };
}

/** Whether a task's stored labels (a compact JSON array) hold `label` as a whole element (as the SQL test). */
function hasLabel(labels: string, label: string): boolean {
  const quoted = JSON.stringify(label);
  return labels.includes(`[${quoted}`) || labels.includes(`,${quoted}`);
}

/**
 * The scheduler's only door to storage. A task is *in flight* exactly when `lease_id is not null
 * and due_ms > now`; every other row is *scheduled* with `future = due_ms` (an expired lease
 * counts as scheduled, due at its expiry instant), so expiry needs no background write.
 */
export class SchedulerRepository {
  private readonly sql: SqlDatabase;
  private readonly statements: ReturnType<typeof hotStatements>;
  private readonly enqueues: GroupCommit<TaskToEnqueue, EnqueueOutcome>;
  /** Concurrent reserves and acknowledges under a lease, where each write commits on its own (PostgreSQL). */
  private readonly claims: GroupCommit<ClaimCall, Claimed | null> | undefined;
  private readonly acknowledges: GroupCommit<AcknowledgeCall, AckOutcome> | undefined;

  /** `windows`: the SQLite slice sizes (tests make them small). */
  constructor(
    connection: SqlConnection,
    private readonly windows: WindowSizes = WINDOWS,
  ) {
    this.sql = connection.database;
    this.statements = hotStatements(this.sql.syntax);
    // A batch's row source has one text whatever its rows where the database keeps statements (PostgreSQL).
    const { syntax } = this.sql;
    const [batch] = syntax.rowSources(TASK_COLUMNS, [[0, '', '', '', '', 0]]);
    const [claims] = syntax.rowSources(CLAIM_COLUMNS, [[0, '', 0]]);
    const [leases] = syntax.rowSources(LEASE_COLUMNS, [['', '']]);
    this.sql.keepPrepared?.([
      ...Object.values(this.statements),
      ...(batch ? [enqueueText(batch.source, syntax.forShare)] : []),
      ...(claims ? [claimManyText(claims.source, syntax.forUpdateSkipLocked)] : []),
      ...(leases ? [acknowledgeManyText(leases.source)] : []),
    ]);
    // Concurrent enqueues share one multi-row insert where each write would otherwise commit on its
    // own (PostgreSQL: one statement and one commit a batch, where one each held enqueues to a few
    // thousand a second); on SQLite they already share the commit, and each goes at once.
    this.enqueues = new GroupCommit((tasks) => this.enqueueBatch(tasks), {
      maxBatch: 512,
      maxInFlight: this.sql.writesShareCommits ? Number.POSITIVE_INFINITY : 2,
      observe: (calls, seconds) => this.sql.commitObserver?.('scheduler_enqueue', calls, seconds),
    });
    // Reserves and acknowledges of busy workers likewise share one statement and one commit (a
    // worker's cycle is a reserve and an acknowledge, each its own commit otherwise). On SQLite they
    // already share the commit and each goes alone, as before.
    if (!this.sql.writesShareCommits) {
      this.claims = new GroupCommit((calls) => this.claimBatch(calls), {
        maxBatch: 64,
        maxInFlight: 2,
        observe: (calls, seconds) => this.sql.commitObserver?.('scheduler_reserve', calls, seconds),
      });
      this.acknowledges = new GroupCommit((calls) => this.acknowledgeBatch(calls), {
        maxBatch: 64,
        maxInFlight: 2,
        observe: (calls, seconds) => this.sql.commitObserver?.('scheduler_acknowledge', calls, seconds),
      });
    }
  }

  // ---- schedulers ----

  async listSchedulers(now: number): Promise<SchedulerRow[]> {
    if (!this.sql.queriesBlockTheProcess)
      return this.sql.read(() =>
        all<SchedulerRow>(`select ${SCHEDULER_COLUMNS} from scheduler_schedulers s order by s.seq`, now),
      );
    const rows = await this.sql.read(() =>
      all<SchedulerRow>(
        'select id, display_name, created_ms, updated_ms, target, retry from scheduler_schedulers order by seq',
      ),
    );
    const pacer = new Pacer();
    for (const row of rows) await this.withCounts(row, now, pacer);
    return rows;
  }

  async getScheduler(id: string, now: number): Promise<SchedulerRow | undefined> {
    if (!this.sql.queriesBlockTheProcess)
      return this.sql.read(() =>
        first<SchedulerRow>(`select ${SCHEDULER_COLUMNS} from scheduler_schedulers s where s.id = ?`, now, id),
      );
    const row = await this.sql.read(() =>
      first<SchedulerRow>(
        'select id, display_name, created_ms, updated_ms, target, retry from scheduler_schedulers where id = ?',
        id,
      ),
    );
    return row ? this.withCounts(row, now, new Pacer()) : undefined;
  }

  /** SQLite: fills in `total` and `inflight` from the windowed count. */
  private async withCounts(row: SchedulerRow, now: number, pacer: Pacer): Promise<SchedulerRow> {
    const windows = await this.countWindows(row.id, now, pacer);
    row.total = windows.reduce((sum, w) => sum + w.total, 0);
    row.inflight = windows.reduce((sum, w) => sum + w.inflight, 0);
    return row;
  }

  /**
   * SQLite: the scheduler's tasks counted per window of `windows.count` sequence numbers (empty
   * windows left out), in sequence order, with a turn for the event loop between windows.
   */
  private async countWindows(
    schedulerId: string,
    now: number,
    pacer: Pacer,
  ): Promise<{ from: number; total: number; inflight: number }[]> {
    const windows: { from: number; total: number; inflight: number }[] = [];
    const nextSeq = (at: number) =>
      this.sql.read(() =>
        first<{ seq: number | null }>(
          'select min(seq) as seq from scheduler_tasks where scheduler_id = ? and seq >= ?',
          schedulerId,
          at,
        ),
      );
    for (let from = (await nextSeq(0))?.seq ?? null; from !== null;) {
      await pacer.pace();
      const start = Number(from);
      const to = start + this.windows.count;
      const row = await this.sql.read(() =>
        first<{ total: number; inflight: number | null }>(
          `select count(*) as total, sum(case when ${INFLIGHT} then 1 else 0 end) as inflight from scheduler_tasks where scheduler_id = ? and seq >= ? and seq < ?`,
          now,
          schedulerId,
          start,
          to,
        ),
      );
      const total = Number(row?.total ?? 0);
      if (total > 0) windows.push({ from: start, total, inflight: Number(row?.inflight ?? 0) });
      from = (await nextSeq(to))?.seq ?? null;
    }
    return windows;
  }

  async exists(id: string): Promise<boolean> {
    return (await this.sql.read(() => first(this.statements.exists, id))) !== undefined;
  }

  /** False when the id is taken. `delivery`: the target and retry policy as stored (JSON), null for none. */
  async createScheduler(
    id: string,
    displayName: string,
    description: string | null,
    now: number,
    delivery: { target: string | null; retry: string | null } = { target: null, retry: null },
  ): Promise<boolean> {
    try {
      await this.sql.write(() =>
        run(
          'insert into scheduler_schedulers (id, display_name, description, created_ms, updated_ms, target, retry) values (?, ?, ?, ?, ?, ?, ?)',
          id,
          displayName,
          description,
          now,
          now,
          delivery.target,
          delivery.retry,
        ),
      );
      return true;
    } catch (error) {
      if (this.sql.isUniqueViolation(error)) return false;
      throw error;
    }
  }

  /**
   * PUT replaces display_name and description; PATCH (`partial`) changes only what is given. The
   * target and retry policy change only when given, on both (null removes them).
   */
  async updateScheduler(
    id: string,
    change: { display_name?: string; description?: string; target?: string | null; retry?: string | null },
    partial: boolean,
    now: number,
  ): Promise<boolean> {
    const sets: string[] = ['updated_ms = ?'];
    const params: unknown[] = [now];
    if (change.display_name !== undefined) {
      sets.push('display_name = ?');
      params.push(change.display_name);
    }
    if (change.description !== undefined || !partial) {
      sets.push('description = ?');
      params.push(change.description ?? null);
    }
    if (change.target !== undefined) {
      sets.push('target = ?');
      params.push(change.target);
    }
    if (change.retry !== undefined) {
      sets.push('retry = ?');
      params.push(change.retry);
    }
    const changed = await this.sql.write(() =>
      run(`update scheduler_schedulers set ${sets.join(', ')} where id = ?`, ...params, id),
    );
    return changed > 0;
  }

  async deleteScheduler(id: string): Promise<boolean> {
    return this.sql.write(function* () {
      const changed = yield* run('delete from scheduler_schedulers where id = ?', id);
      if (changed > 0) {
        yield* run('delete from scheduler_tasks where scheduler_id = ?', id);
        yield* run('delete from scheduler_dead where scheduler_id = ?', id);
      }
      return changed > 0;
    });
  }

  // ---- tasks ----

  /** 'created', 'exists' (task id in use) or 'not_found' (no such scheduler). */
  enqueue(schedulerId: string, id: string, payload: string, labels: string, due: number): Promise<EnqueueOutcome> {
    return this.enqueues.submit({ schedulerId, id, payload, labels, due });
  }

  private enqueueBatch(tasks: readonly TaskToEnqueue[]): Promise<Settled<EnqueueOutcome>[]> {
    return togetherThenAlone(tasks, {
      key: (task) => taskKey(task.schedulerId, task.id),
      together: (firsts) => this.enqueueMany(firsts),
      // Not inserted together: its id in use or its scheduler missing (rare), told apart alone.
      alone: (task) => this.enqueueOne(task),
    });
  }

  /** Distinct tasks in one statement: 'created' for those inserted, undefined for the rest. */
  private async enqueueMany(tasks: readonly TaskToEnqueue[]): Promise<(EnqueueOutcome | undefined)[]> {
    const rows = tasks.map((task, n) => [n, task.schedulerId, task.id, task.payload, task.labels, task.due]);
    const { syntax } = this.sql;
    // One statement on PostgreSQL (every row in one source); on SQLite a few, inside its group commit.
    const inserted = await this.sql.writeEach(function* () {
      const created = new Set<string>();
      for (const { source, params } of syntax.rowSources(TASK_COLUMNS, rows)) {
        // The scheduler row is share-locked on PostgreSQL: an enqueue racing a delete of its
        // scheduler either commits first (and the delete removes its task) or sees it gone. Rows
        // take their sequence numbers in the order the select gives them, so `order by v.n` keeps
        // enqueue order; a task id in use is skipped here.
        const returned = yield* all<{ scheduler_id: string; id: string }>(
          enqueueText(source, syntax.forShare),
          ...params,
        );
        for (const row of returned) created.add(taskKey(row.scheduler_id, row.id));
      }
      return created;
    });
    return tasks.map((task) => (inserted.has(taskKey(task.schedulerId, task.id)) ? 'created' : undefined));
  }

  private async enqueueOne(task: TaskToEnqueue): Promise<EnqueueOutcome> {
    try {
      // One statement, atomic by itself: no transaction around it (one round trip on PostgreSQL).
      const inserted = await this.sql.writeEach(() =>
        run(
          this.statements.enqueueOne,
          task.schedulerId,
          task.id,
          task.payload,
          task.labels,
          task.due,
          task.schedulerId,
        ),
      );
      return inserted > 0 ? 'created' : 'not_found';
    } catch (error) {
      if (this.sql.isUniqueViolation(error)) return 'exists';
      throw error;
    }
  }

  /**
   * Leases the due task with the earliest due time (ties: enqueue order) in one atomic statement:
   * on SQLite the single writer serialises it; on PostgreSQL `FOR UPDATE SKIP LOCKED` lets
   * concurrent claims from any instance take different rows without waiting on each other.
   */
  async claim(schedulerId: string, now: number, worktimeMs: number): Promise<Claimed | undefined> {
    const call = { schedulerId, now, worktimeMs, leaseId: randomUUID() };
    return (await (this.claims ? this.claims.submit(call) : this.claimOne(call))) ?? undefined;
  }

  private async claimOne({ schedulerId, now, worktimeMs, leaseId }: ClaimCall): Promise<Claimed | null> {
    const row = await this.sql.writeEach(() =>
      first<Omit<Claimed, 'lease_id'>>(this.statements.claim, leaseId, now + worktimeMs, schedulerId, now),
    );
    return row ? { ...row, lease_id: leaseId } : null;
  }

  private claimBatch(calls: readonly ClaimCall[]): Promise<Settled<Claimed | null>[]> {
    return togetherThenAlone(calls, {
      key: (call) => call.leaseId,
      together: (firsts) => inGroups(firsts, (group) => this.claimMany(group)),
      alone: (call) => this.claimOne(call),
    });
  }

  /**
   * Claims of one scheduler in one statement: the earliest due tasks, the first to the first call
   * and so on, as the calls one after another would have taken them. All are judged at the latest
   * `now` of the calls (each of them still waiting then), each lease running from there for its
   * own worktime. Fewer due tasks than calls: the last calls get none, as alone they would have.
   */
  private async claimMany(calls: readonly ClaimCall[]): Promise<(Claimed | null)[]> {
    const now = Math.max(...calls.map((call) => call.now));
    const { syntax } = this.sql;
    const [source] = syntax.rowSources(
      CLAIM_COLUMNS,
      calls.map((call, i) => [i + 1, call.leaseId, now + call.worktimeMs]),
    );
    const claimed = await this.sql.writeEach(() =>
      all<Omit<Claimed, 'lease_id'> & { n: number }>(
        claimManyText(source!.source, syntax.forUpdateSkipLocked),
        calls[0]!.schedulerId,
        now,
        calls.length,
        ...source!.params,
      ),
    );
    const byNumber = new Map(claimed.map(({ n, ...row }) => [Number(n), row]));
    return calls.map((call, i) => {
      const row = byNumber.get(i + 1);
      return row ? { ...row, lease_id: call.leaseId } : null;
    });
  }

  /** The next instant something in the scheduler comes due (a waiting task or a lease expiry). */
  async nextDue(schedulerId: string, now: number): Promise<number | undefined> {
    const row = await this.sql.read(() => first<{ due_ms: number }>(this.statements.nextDue, schedulerId, now));
    return row?.due_ms;
  }

  /** The next lease expiry (for streams, which must show expiries as they happen). */
  async nextExpiry(schedulerId: string, now: number): Promise<number | undefined> {
    const row = await this.sql.read(() =>
      first<{ due_ms: number }>(
        'select min(due_ms) as due_ms from scheduler_tasks where scheduler_id = ? and lease_id is not null and due_ms > ?',
        schedulerId,
        now,
      ),
    );
    return row?.due_ms ?? undefined;
  }

  async acknowledge(
    schedulerId: string,
    taskId: string,
    leaseId: string | undefined,
    now: number,
  ): Promise<AckOutcome> {
    if (this.acknowledges && leaseId !== undefined)
      return this.acknowledges.submit({ schedulerId, taskId, leaseId, now });
    return this.acknowledgeOne(schedulerId, taskId, leaseId, now);
  }

  private acknowledgeBatch(calls: readonly AcknowledgeCall[]): Promise<Settled<AckOutcome>[]> {
    return togetherThenAlone(calls, {
      key: (call) => taskKey(call.schedulerId, call.taskId),
      together: (firsts) => inGroups(firsts, (group) => this.acknowledgeMany(group)),
      // Not deleted together (its lease expired or was never its, or it is gone): told apart alone.
      alone: (call) => this.acknowledgeOne(call.schedulerId, call.taskId, call.leaseId, call.now),
    });
  }

  /**
   * Distinct tasks of one scheduler under their leases in one statement, judged at the latest `now`
   * of the calls (each of them still waiting then): 'done' for those deleted, undefined for the rest.
   */
  private async acknowledgeMany(calls: readonly AcknowledgeCall[]): Promise<(AckOutcome | undefined)[]> {
    const now = Math.max(...calls.map((call) => call.now));
    const [source] = this.sql.syntax.rowSources(
      LEASE_COLUMNS,
      calls.map((call) => [call.taskId, call.leaseId]),
    );
    const deleted = await this.sql.writeEach(() =>
      all<{ id: string }>(acknowledgeManyText(source!.source), calls[0]!.schedulerId, now, ...source!.params),
    );
    const done = new Set(deleted.map((row) => row.id));
    return calls.map((call) => (done.has(call.taskId) ? 'done' : undefined));
  }

  private async acknowledgeOne(
    schedulerId: string,
    taskId: string,
    leaseId: string | undefined,
    now: number,
  ): Promise<AckOutcome> {
    const statements = this.statements;
    // The delete is the write; what follows only reads why it matched nothing.
    return this.sql.writeEach(function* () {
      const changed =
        leaseId === undefined
          ? yield* run(statements.acknowledge, schedulerId, taskId)
          : yield* run(statements.acknowledgeLeased, schedulerId, taskId, leaseId, now);
      if (changed > 0) return 'done';
      return yield* missing(schedulerId, taskId, 'lease_mismatch');
    });
  }

  async extend(
    schedulerId: string,
    taskId: string,
    leaseId: string | undefined,
    extensionMs: number,
    now: number,
  ): Promise<ExtendOutcome> {
    const lock = this.sql.syntax.forUpdate;
    return this.sql.write(function* (): Work<ExtendOutcome> {
      const row = yield* first<{ due_ms: number; lease_id: string | null }>(
        `select due_ms, lease_id from scheduler_tasks where scheduler_id = ? and id = ?${lock}`,
        schedulerId,
        taskId,
      );
      if (!row) return yield* missing(schedulerId, taskId, 'task_not_found');
      if (row.lease_id === null || row.due_ms <= now) return 'conflict';
      if (leaseId !== undefined && leaseId !== row.lease_id) return 'lease_mismatch';
      // Capped so that repeated extensions cannot leave the range a timestamp can be written in.
      const expires = Math.min(row.due_ms + extensionMs, MAX_TIME_MS);
      yield* run(
        'update scheduler_tasks set due_ms = ? where scheduler_id = ? and id = ?',
        expires,
        schedulerId,
        taskId,
      );
      return { expires };
    });
  }

  async reschedule(schedulerId: string, taskId: string, due: number, now: number): Promise<RescheduleOutcome> {
    // The update is the write; what follows only reads why it matched nothing.
    return this.sql.writeEach(function* () {
      const changed = yield* run(
        'update scheduler_tasks set due_ms = ?, lease_id = null where scheduler_id = ? and id = ? and (lease_id is null or due_ms <= ?)',
        due,
        schedulerId,
        taskId,
        now,
      );
      if (changed > 0) return 'done';
      return yield* missing(schedulerId, taskId, 'task_in_flight');
    });
  }

  async counts(schedulerId: string, now: number): Promise<Counts> {
    if (this.sql.queriesBlockTheProcess) {
      const windows = await this.countWindows(schedulerId, now, new Pacer());
      const total = windows.reduce((sum, w) => sum + w.total, 0);
      const inflight = windows.reduce((sum, w) => sum + w.inflight, 0);
      return { scheduled: total - inflight, inflight };
    }
    const row = await this.sql.read(() =>
      first<{ total: number; inflight: number | null }>(
        'select count(*) as total, sum(case when lease_id is not null and due_ms > ? then 1 else 0 end) as inflight from scheduler_tasks where scheduler_id = ?',
        now,
        schedulerId,
      ),
    );
    const total = Number(row?.total ?? 0);
    const inflight = Number(row?.inflight ?? 0);
    return { scheduled: total - inflight, inflight };
  }

  /** Both lists with the same filter, paginated independently, in enqueue order. */
  async listTasks(
    schedulerId: string,
    filter: TaskFilter,
    scheduledPage: Page,
    inflightPage: Page,
    now: number,
  ): Promise<TaskPages> {
    if (this.sql.queriesBlockTheProcess) {
      const filtered = (filter.search !== undefined && filter.search !== '') || filter.labels.length > 0;
      return filtered
        ? this.searchTasks(schedulerId, filter, scheduledPage, inflightPage, now)
        : this.pageTasks(schedulerId, scheduledPage, inflightPage, now);
    }
    const conditions: string[] = ['scheduler_id = ?'];
    const params: unknown[] = [schedulerId];
    if (filter.search !== undefined && filter.search !== '') {
      conditions.push(`${this.sql.syntax.position('payload', '?')} > 0`);
      params.push(filter.search);
    }
    for (const label of filter.labels) {
      // Labels are stored as a compact JSON array: an element is exactly `"…"` after `[` or `,`,
      // and an unescaped quote can only be a delimiter, so this matches whole labels only.
      const quoted = JSON.stringify(label);
      conditions.push(
        `(${this.sql.syntax.position('labels', '?')} > 0 or ${this.sql.syntax.position('labels', '?')} > 0)`,
      );
      params.push(`[${quoted}`, `,${quoted}`);
    }
    const where = conditions.join(' and ');
    const inflight = 'lease_id is not null and due_ms > ?';
    const scheduled = '(lease_id is null or due_ms <= ?)';
    return this.sql.read(function* () {
      const totals = yield* first<{ total: number; inflight: number | null }>(
        `select count(*) as total, sum(case when ${inflight} then 1 else 0 end) as inflight from scheduler_tasks where ${where}`,
        now,
        ...params,
      );
      const inflightTotal = Number(totals?.inflight ?? 0);
      const scheduledTotal = Number(totals?.total ?? 0) - inflightTotal;
      const scheduledRows =
        (scheduledPage.page - 1) * scheduledPage.perPage < scheduledTotal
          ? yield* all<ListedTask>(
              `select id, due_ms, labels, attempts, last_error from scheduler_tasks where ${where} and ${scheduled} order by seq limit ? offset ?`,
              ...params,
              now,
              scheduledPage.perPage,
              (scheduledPage.page - 1) * scheduledPage.perPage,
            )
          : [];
      const inflightRows =
        (inflightPage.page - 1) * inflightPage.perPage < inflightTotal
          ? yield* all<ListedTask>(
              `select id, due_ms, labels, attempts, last_error from scheduler_tasks where ${where} and ${inflight} order by seq limit ? offset ?`,
              ...params,
              now,
              inflightPage.perPage,
              (inflightPage.page - 1) * inflightPage.perPage,
            )
          : [];
      return { scheduled: scheduledRows, inflight: inflightRows, scheduledTotal, inflightTotal };
    });
  }

  /**
   * SQLite, no filter: totals from the windowed count; each page is read from the window where it
   * starts, so no query skips more than one window of rows.
   */
  private async pageTasks(
    schedulerId: string,
    scheduledPage: Page,
    inflightPage: Page,
    now: number,
  ): Promise<TaskPages> {
    const pacer = new Pacer();
    const windows = await this.countWindows(schedulerId, now, pacer);
    const read = async (page: Page, inflight: boolean): Promise<{ rows: ListedTask[]; total: number }> => {
      const countOf = (w: { total: number; inflight: number }) => (inflight ? w.inflight : w.total - w.inflight);
      const total = windows.reduce((sum, w) => sum + countOf(w), 0);
      const rows: ListedTask[] = [];
      let skip = (page.page - 1) * page.perPage;
      // Window by window from the one where the page starts, each query bounded by its window.
      for (const w of windows) {
        if (rows.length >= page.perPage) break;
        if (skip >= countOf(w)) {
          skip -= countOf(w);
          continue;
        }
        await pacer.pace();
        const offset = skip;
        const found = await this.sql.read(() =>
          all<ListedTask>(
            `select id, due_ms, labels, attempts, last_error from scheduler_tasks where scheduler_id = ? and seq >= ? and seq < ? and ${inflight ? INFLIGHT : SCHEDULED} order by seq limit ? offset ?`,
            schedulerId,
            w.from,
            w.from + this.windows.count,
            now,
            page.perPage - rows.length,
            offset,
          ),
        );
        rows.push(...found);
        skip = 0;
      }
      return { rows, total };
    };
    const scheduled = await read(scheduledPage, false);
    const inflight = await read(inflightPage, true);
    return {
      scheduled: scheduled.rows,
      inflight: inflight.rows,
      scheduledTotal: scheduled.total,
      inflightTotal: inflight.total,
    };
  }

  /**
   * SQLite, with `search` or `label`: the tasks are read in windows of at most `windows.searchBytes`
   * of payload and labels (or one task), tested here, counted, and kept when on a requested page.
   */
  private async searchTasks(
    schedulerId: string,
    filter: TaskFilter,
    scheduledPage: Page,
    inflightPage: Page,
    now: number,
  ): Promise<TaskPages> {
    const pacer = new Pacer();
    const search = filter.search !== undefined && filter.search !== '' ? filter.search : null;
    const result: TaskPages = { scheduled: [], inflight: [], scheduledTotal: 0, inflightTotal: 0 };
    const keep = (task: ListedTask, inflight: boolean) => {
      const page = inflight ? inflightPage : scheduledPage;
      const index = inflight ? result.inflightTotal++ : result.scheduledTotal++;
      const start = (page.page - 1) * page.perPage;
      if (index >= start && index < start + page.perPage) (inflight ? result.inflight : result.scheduled).push(task);
    };
    const columns =
      search !== null
        ? 'seq, id, due_ms, labels, lease_id, attempts, last_error, payload'
        : 'seq, id, due_ms, labels, lease_id, attempts, last_error';
    const size = search !== null ? 'octet_length(payload) + octet_length(labels)' : 'octet_length(labels)';
    let after = 0;
    for (;;) {
      await pacer.pace();
      const sizes = await this.sql.read(() =>
        all<{ seq: number; size: number }>(
          `select seq, ${size} as size from scheduler_tasks where scheduler_id = ? and seq > ? order by seq limit ?`,
          schedulerId,
          after,
          this.windows.probeRows,
        ),
      );
      if (sizes.length === 0) break;
      let at = 0;
      while (at < sizes.length) {
        // One window: tasks up to `windows.searchBytes` together, at least one.
        let bytes = Number(sizes[at]!.size);
        let end = at + 1;
        while (end < sizes.length && bytes + Number(sizes[end]!.size) <= this.windows.searchBytes)
          bytes += Number(sizes[end++]!.size);
        const last = Number(sizes[end - 1]!.seq);
        await pacer.pace();
        const rows = await this.sql.read(() =>
          all<{
            seq: number;
            id: string;
            due_ms: number;
            labels: string;
            lease_id: string | null;
            attempts: number;
            last_error: string | null;
            payload?: string;
          }>(
            `select ${columns} from scheduler_tasks where scheduler_id = ? and seq > ? and seq <= ? order by seq`,
            schedulerId,
            after,
            last,
          ),
        );
        for (const row of rows) {
          if (search !== null && !row.payload!.includes(search)) continue;
          if (!filter.labels.every((label) => hasLabel(row.labels, label))) continue;
          keep(
            { id: row.id, due_ms: row.due_ms, labels: row.labels, attempts: row.attempts, last_error: row.last_error },
            row.lease_id !== null && Number(row.due_ms) > now,
          );
        }
        after = last;
        at = end;
      }
      if (sizes.length < this.windows.probeRows) break;
    }
    return result;
  }

  // ---- platform delivery (README: Delivery) ----

  /** Every scheduler with a target, for the delivery engine. */
  async targetedSchedulers(): Promise<TargetedScheduler[]> {
    return this.sql.read(() =>
      all<TargetedScheduler>(
        'select id, target, retry from scheduler_schedulers where target is not null order by seq',
      ),
    );
  }

  /** The target and retry policy of one scheduler (undefined when it is gone). */
  async deliveryOf(id: string): Promise<{ target: string | null; retry: string | null } | undefined> {
    return this.sql.read(() =>
      first<{ target: string | null; retry: string | null }>(
        'select target, retry from scheduler_schedulers where id = ?',
        id,
      ),
    );
  }

  /**
   * The claim of `claim` (same order, same atomic step, so manual reserves and the platform
   * compete fairly) that also counts the delivery attempt in the same statement.
   */
  async claimForDelivery(schedulerId: string, now: number, leaseMs: number): Promise<DeliveryClaim | undefined> {
    const leaseId = randomUUID();
    const row = await this.sql.writeEach(() =>
      first<Omit<DeliveryClaim, 'lease_id'>>(
        this.statements.claimForDelivery,
        leaseId,
        now + leaseMs,
        schedulerId,
        now,
      ),
    );
    return row ? { ...row, attempts: Number(row.attempts), lease_id: leaseId } : undefined;
  }

  /**
   * A delivery succeeded: the task is gone. Fenced by the lease id only: a new claim changes it,
   * so a match means nobody took the task since (an expired but untaken lease still acknowledges).
   */
  async deliveryDone(schedulerId: string, taskId: string, leaseId: string): Promise<boolean> {
    const changed = await this.sql.writeEach(() => run(this.statements.deliveryDone, schedulerId, taskId, leaseId));
    return changed > 0;
  }

  /** A delivery failed and may be tried again: due at `due`, lease cleared, error kept (fenced by the lease id). */
  async deliveryFailed(
    schedulerId: string,
    taskId: string,
    leaseId: string,
    due: number,
    error: string,
  ): Promise<boolean> {
    const changed = await this.sql.writeEach(() =>
      run(
        'update scheduler_tasks set due_ms = ?, lease_id = null, last_error = ? where scheduler_id = ? and id = ? and lease_id = ?',
        due,
        error,
        schedulerId,
        taskId,
        leaseId,
      ),
    );
    return changed > 0;
  }

  /** The last delivery failed: the task moves to the dead list in one transaction (fenced by the lease id). */
  async deliveryDead(
    schedulerId: string,
    taskId: string,
    leaseId: string,
    error: string,
    now: number,
  ): Promise<boolean> {
    const lock = this.sql.syntax.forUpdate;
    return this.sql.write(function* () {
      const row = yield* first<{ payload: string; labels: string; attempts: number }>(
        `select payload, labels, attempts from scheduler_tasks where scheduler_id = ? and id = ? and lease_id = ?${lock}`,
        schedulerId,
        taskId,
        leaseId,
      );
      if (!row) return false;
      yield* run('delete from scheduler_tasks where scheduler_id = ? and id = ?', schedulerId, taskId);
      // A task id may be reused once a task is gone: a newer dead task of that id replaces the older.
      yield* run('delete from scheduler_dead where scheduler_id = ? and id = ?', schedulerId, taskId);
      yield* run(
        'insert into scheduler_dead (scheduler_id, id, payload, labels, attempts, last_error, failed_ms) values (?, ?, ?, ?, ?, ?, ?)',
        schedulerId,
        taskId,
        row.payload,
        row.labels,
        Number(row.attempts),
        error,
        now,
      );
      return true;
    });
  }

  /** Dead tasks per scheduler that has any (metrics): one grouped count on the dead list's index. */
  async deadCounts(): Promise<Map<string, number>> {
    const rows = await this.sql.read(() =>
      all<{ scheduler_id: string; dead: number }>(
        'select scheduler_id, count(*) as dead from scheduler_dead group by scheduler_id',
      ),
    );
    return new Map(rows.map((row) => [row.scheduler_id, Number(row.dead)]));
  }

  /** One page of the dead list (in the order the tasks died) and its total. */
  async listDead(schedulerId: string, page: Page): Promise<{ tasks: DeadTask[]; total: number }> {
    return this.sql.read(function* () {
      const count = yield* first<{ total: number }>(
        'select count(*) as total from scheduler_dead where scheduler_id = ?',
        schedulerId,
      );
      const total = Number(count?.total ?? 0);
      const offset = (page.page - 1) * page.perPage;
      const tasks =
        offset < total
          ? yield* all<DeadTask>(
              'select id, payload, labels, attempts, last_error, failed_ms from scheduler_dead where scheduler_id = ? order by seq limit ? offset ?',
              schedulerId,
              page.perPage,
              offset,
            )
          : [];
      return { tasks, total };
    });
  }

  /** A dead task back into the scheduler, due `now` with no attempts: one transaction. */
  async retryDead(schedulerId: string, taskId: string, now: number): Promise<DeadRetryOutcome> {
    const { forUpdate, forShare } = this.sql.syntax;
    const isUnique = (error: unknown) => this.sql.isUniqueViolation(error);
    try {
      return await this.sql.write(function* (): Work<DeadRetryOutcome> {
        if (!(yield* first(`select 1 as one from scheduler_schedulers where id = ?${forShare}`, schedulerId)))
          return 'not_found';
        const dead = yield* first<{ payload: string; labels: string }>(
          `select payload, labels from scheduler_dead where scheduler_id = ? and id = ?${forUpdate}`,
          schedulerId,
          taskId,
        );
        if (!dead) return 'task_not_found';
        if (yield* first('select 1 as one from scheduler_tasks where scheduler_id = ? and id = ?', schedulerId, taskId))
          return 'exists';
        yield* run('delete from scheduler_dead where scheduler_id = ? and id = ?', schedulerId, taskId);
        yield* run(
          'insert into scheduler_tasks (scheduler_id, id, payload, labels, due_ms) values (?, ?, ?, ?, ?)',
          schedulerId,
          taskId,
          dead.payload,
          dead.labels,
          now,
        );
        return 'done';
      });
    } catch (error) {
      // An enqueue of that id that committed between the check and the insert.
      if (isUnique(error)) return 'exists';
      throw error;
    }
  }

  /** Discards a dead task. */
  async deleteDead(schedulerId: string, taskId: string): Promise<'done' | 'not_found' | 'task_not_found'> {
    return this.sql.writeEach(function* () {
      const changed = yield* run('delete from scheduler_dead where scheduler_id = ? and id = ?', schedulerId, taskId);
      if (changed > 0) return 'done';
      const scheduler = yield* first('select 1 as one from scheduler_schedulers where id = ?', schedulerId);
      return scheduler ? 'task_not_found' : 'not_found';
    });
  }

  // ---- the generated key (README: Generated key) ----

  /** The stored generated key, creating it when there is none; `created` tells whether this call did. */
  async generatedKey(candidate: string): Promise<{ key: string; created: boolean }> {
    const inserted = await this.sql.write(() =>
      run('insert into scheduler_generated_key (slot, api_key) values (1, ?) on conflict (slot) do nothing', candidate),
    );
    const row = await this.sql.read(() =>
      first<{ api_key: string }>('select api_key from scheduler_generated_key where slot = 1'),
    );
    if (!row) throw new Error('scheduler: generated key missing after insert');
    return { key: row.api_key, created: inserted > 0 };
  }
}

/**
 * `write` for each scheduler's calls of `calls` (in their order), the schedulers at once; the
 * outputs in the order of `calls`.
 */
async function inGroups<Call extends { schedulerId: string }, Out>(
  calls: readonly Call[],
  write: (group: readonly Call[]) => Promise<readonly Out[]>,
): Promise<Out[]> {
  const groups = new Map<string, number[]>();
  calls.forEach((call, i) => {
    const group = groups.get(call.schedulerId);
    if (group) group.push(i);
    else groups.set(call.schedulerId, [i]);
  });
  const outputs = new Array<Out>(calls.length);
  await Promise.all(
    [...groups.values()].map(async (indexes) => {
      const written = await write(indexes.map((i) => calls[i]!));
      indexes.forEach((i, k) => (outputs[i] = written[k]!));
    }),
  );
  return outputs;
}

/** After a write matched no row: which 404, or the given state error. */
function* missing<T extends string>(
  schedulerId: string,
  taskId: string,
  stateError: T,
): Work<T | 'not_found' | 'task_not_found'> {
  const task = yield* first(
    'select 1 as one from scheduler_tasks where scheduler_id = ? and id = ?',
    schedulerId,
    taskId,
  );
  if (task) return stateError;
  const scheduler = yield* first('select 1 as one from scheduler_schedulers where id = ?', schedulerId);
  return scheduler ? 'task_not_found' : 'not_found';
}
