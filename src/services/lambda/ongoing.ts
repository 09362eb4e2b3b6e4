import { newId } from '../../core/ids.ts';
import type { SqlConnection } from '../../store/db.ts';
import { all, run } from '../../store/sql-work.ts';
import type { SqlDatabase } from '../../store/sql/types.ts';

export interface Ongoing {
  id: string;
  owner: string;
  lambda_id: string;
  lambda_name: string;
  started_at: string;
  method: string;
  path: string;
}

export interface OngoingOptions {
  /** How long a published row stays valid without its instance renewing it (default 30 s). */
  leaseMs?: number;
  /** At most this long after a start or an end, other instances see it (default 250 ms). */
  publishMs?: number;
}

/** An owner's view of one invocation: what `/ongoing` lists. */
export type OngoingItem = Omit<Ongoing, 'owner'>;

/**
 * The invocations running on every instance (README: Ongoing invocations). Each instance keeps its
 * own in memory — exact, and free on the invocation's path — and publishes them as rows of
 * `lambda_ongoing` (one per invocation, with the instance's id and a lease): a start or an end
 * marks the set changed and one write, at most every `publishMs`, brings the table in line, so a
 * burst of short invocations costs a few writes a second, not two per invocation. While it has
 * rows, the instance renews their lease a third of `leaseMs` before it runs out; the rows of an
 * instance that died stop being listed when their lease ends and are deleted by the next
 * instance that publishes. `/ongoing` lists this instance's own from memory and the others' rows.
 */
export class OngoingInvocations {
  readonly instance = newId();
  private readonly local = new Map<string, Ongoing>();
  private readonly database: SqlDatabase;
  private readonly leaseMs: number;
  private readonly publishMs: number;
  /** Ids this instance has rows for, as of its last publication. */
  private published = new Set<string>();
  private leaseUntil = 0;
  private timer: NodeJS.Timeout | undefined;
  private due = 0;
  private publishing: Promise<void> | undefined;
  private closed = false;

  constructor(
    connection: SqlConnection,
    private readonly onError: (error: unknown) => void = () => undefined,
    options: OngoingOptions = {},
  ) {
    this.database = connection.database;
    this.leaseMs = options.leaseMs ?? 30_000;
    this.publishMs = options.publishMs ?? 250;
  }

  /** An invocation started on this instance. */
  start(entry: Ongoing): void {
    this.local.set(entry.id, entry);
    this.schedule(this.publishMs);
  }

  /** It ended (whatever its outcome). */
  end(id: string): void {
    this.local.delete(id);
    if (this.published.has(id)) this.schedule(this.publishMs);
  }

  /** The owner's running invocations on every instance, oldest first. */
  async list(owner: string, now: number = Date.now()): Promise<OngoingItem[]> {
    const rows = await this.database.read(() =>
      all<Ongoing>(
        'select id, owner, lambda_id, lambda_name, started_at, method, path from lambda_ongoing where owner = ? and instance <> ? and lease_until > ?',
        owner,
        this.instance,
        Math.floor(now),
      ),
    );
    const mine = [...this.local.values()].filter((entry) => entry.owner === owner);
    return [...mine, ...rows]
      .sort((a, b) => (a.started_at < b.started_at ? -1 : a.started_at > b.started_at ? 1 : 0))
      .map(({ id, lambda_id, lambda_name, started_at, method, path }) => ({
        id,
        lambda_id,
        lambda_name,
        started_at,
        method,
        path,
      }));
  }

  /** Running invocations on this instance (for tests and metrics). */
  get size(): number {
    return this.local.size;
  }

  /** Stops publishing and removes this instance's rows (a clean shutdown leaves none behind). */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.publishing;
    if (this.published.size === 0) return;
    const instance = this.instance;
    await this.database.write(() => run('delete from lambda_ongoing where instance = ?', instance));
    this.published.clear();
  }

  /** Publishes after `delayMs`, or sooner when a publication is already due sooner. */
  private schedule(delayMs: number): void {
    if (this.closed) return;
    const due = Date.now() + delayMs;
    if (this.timer !== undefined) {
      if (this.due <= due) return;
      clearTimeout(this.timer);
    }
    this.due = due;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // One publication at a time: each starts from what the previous one wrote.
      const previous = this.publishing ?? Promise.resolve();
      const next = previous
        .then(() => this.publish())
        .catch((error: unknown) => {
          this.onError(error);
          // Tried again later: the table must come in line with what runs here.
          this.schedule(this.publishMs * 4);
        });
      this.publishing = next;
      void next.finally(() => {
        if (this.publishing === next) this.publishing = undefined;
      });
    }, delayMs);
    this.timer.unref();
  }

  /** Brings this instance's rows in line with what runs here, renews their lease, deletes expired rows. */
  async publish(now: number = Date.now()): Promise<void> {
    const current = new Map(this.local);
    const added = [...current.values()].filter((entry) => !this.published.has(entry.id));
    const ended = [...this.published].filter((id) => !current.has(id));
    // Every write renews the lease of all this instance's rows, so they all end together.
    const renew =
      current.size > 0 && (added.length > 0 || ended.length > 0 || now >= this.leaseUntil - this.leaseMs / 3);
    if (added.length === 0 && ended.length === 0 && !renew) return;
    const instance = this.instance;
    const leaseUntil = Math.floor(now + this.leaseMs);
    await this.database.write(function* () {
      for (const id of ended) yield* run('delete from lambda_ongoing where id = ?', id);
      if (renew) yield* run('update lambda_ongoing set lease_until = ? where instance = ?', leaseUntil, instance);
      for (const entry of added)
        yield* run(
          `insert into lambda_ongoing (id, instance, owner, lambda_id, lambda_name, started_at, method, path, lease_until)
            values (?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict (id) do nothing`,
          entry.id,
          instance,
          entry.owner,
          entry.lambda_id,
          entry.lambda_name,
          entry.started_at,
          entry.method,
          entry.path,
          leaseUntil,
        );
      // Rows of instances that stopped renewing (crashed, killed) go with any instance's write.
      yield* run('delete from lambda_ongoing where lease_until <= ?', Math.floor(now));
    });
    this.published = new Set(current.keys());
    this.leaseUntil = renew ? leaseUntil : this.published.size === 0 ? 0 : this.leaseUntil;
    // Something changed meanwhile, or the lease needs renewing while invocations run.
    if (this.local.size !== current.size || [...this.local.keys()].some((id) => !current.has(id)))
      this.schedule(this.publishMs);
    else if (this.published.size > 0)
      this.schedule(Math.max(this.publishMs, this.leaseUntil - this.leaseMs / 3 - Date.now()));
  }
}
