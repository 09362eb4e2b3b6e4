import type { SqlConnection } from '../store/db.ts';
import { all, first, run } from '../store/sql-work.ts';

/**
 * Bounds what anonymous callers can make the gateway spend on bcrypt (issue 17, item 13): each
 * uncached API-key check costs a bcrypt comparison (~50 ms of a thread), so a flood of wrong
 * secrets against one key could starve everyone's logins. Per client address at most
 * `maxConcurrentPerAddress` checks run at once; failed checks are counted per key and per address
 * in a fixed window, and past the limit no further check of that key (or from that address) runs
 * until the window ends. Cached successes never reach the guard, so a key in use keeps working.
 *
 * Scaled out (README: What instances share), the failure counts live in the database
 * (`auth_credential_failures`), so an attacker gains nothing by spreading guesses over instances:
 * every instance refuses a key once the failures counted by all of them reach the limit. A limit
 * an instance has seen is remembered here until its window ends, so a refused flood costs no query.
 * The concurrency cap stays per instance: it protects the instance's own bcrypt threads.
 * Memory is bounded: at most `maxEntries` counters; expired ones are dropped as new ones arrive.
 */
export interface CredentialGuardOptions {
  /** Failed checks of one key per window before that key's checks are refused. */
  maxFailuresPerKey: number;
  /** Failed checks from one address per window before its checks are refused. */
  maxFailuresPerAddress: number;
  windowMs: number;
  /** Checks running at once for one address; more are refused at once (429). */
  maxConcurrentPerAddress: number;
  maxEntries?: number;
}

export const DEFAULT_GUARD: CredentialGuardOptions = {
  maxFailuresPerKey: 20,
  maxFailuresPerAddress: 30,
  windowMs: 60_000,
  maxConcurrentPerAddress: 4,
};

interface Counter {
  count: number;
  resetAt: number;
}

export type Admission = { ok: true; release: () => void } | { ok: false; retryAfterSeconds: number };

/** Failure counters every instance shares: `name` is `k:<key>` or `a:<address>`. */
export class SharedFailureCounts {
  constructor(private readonly connection: SqlConnection) {}

  /** The open counters among `names` (windows started after `now - windowMs`). */
  async read(names: readonly string[], windowMs: number, now: number): Promise<Map<string, Counter>> {
    const rows = await this.connection.database.read(() =>
      all<{ name: string; failures: number; window_started_at: number }>(
        `select name, failures, window_started_at from auth_credential_failures where name in (${names.map(() => '?').join(', ')}) and window_started_at > ?`,
        ...names,
        now - windowMs,
      ),
    );
    return new Map(
      rows.map((row) => [row.name, { count: Number(row.failures), resetAt: Number(row.window_started_at) + windowMs }]),
    );
  }

  /**
   * Counts one failure for each name, atomically (an upsert each, so failures counted at once on
   * any number of instances all count); a window older than `windowMs` starts over at 1.
   */
  async add(names: readonly string[], windowMs: number, now: number): Promise<Map<string, Counter>> {
    const cutoff = now - windowMs;
    return this.connection.database.write(function* () {
      const counters = new Map<string, Counter>();
      for (const name of names) {
        const row = yield* first<{ failures: number; window_started_at: number }>(
          `insert into auth_credential_failures (name, failures, window_started_at) values (?, 1, ?)
            on conflict (name) do update set
              failures = case when auth_credential_failures.window_started_at <= ? then 1 else auth_credential_failures.failures + 1 end,
              window_started_at = case when auth_credential_failures.window_started_at <= ? then cast(? as bigint) else auth_credential_failures.window_started_at end
            returning failures, window_started_at`,
          name,
          now,
          cutoff,
          cutoff,
          now,
        );
        if (row) counters.set(name, { count: Number(row.failures), resetAt: Number(row.window_started_at) + windowMs });
      }
      return counters;
    });
  }

  /** Deletes counters whose window started at or before `before`; returns how many. */
  async sweep(before: number): Promise<number> {
    return this.connection.database.write(() =>
      run('delete from auth_credential_failures where window_started_at <= ?', before),
    );
  }
}

export class CredentialGuard {
  /** What this instance knows of the counters: its own counts, or the shared ones it last saw. */
  private readonly failures = new Map<string, Counter>();
  /** Checks running on this instance per address (a per-instance cap, see above). */
  private readonly running = new Map<string, number>();
  private readonly maxEntries: number;
  /** Shared reads in flight, by key and address. */
  private readonly reads = new Map<string, Promise<void>>();
  private sweptAt: number;

  /** `shared`: counters in the database (every instance's failures count); without it, this instance's only. */
  constructor(
    private readonly options: CredentialGuardOptions = DEFAULT_GUARD,
    private readonly now: () => number = Date.now,
    private readonly shared?: SharedFailureCounts,
  ) {
    this.maxEntries = options.maxEntries ?? 100_000;
    this.sweptAt = now();
  }

  /**
   * Seconds until `key` or `address` may be checked again when every instance's failures count
   * (undefined: not limited). Reads the shared counters unless this instance already knows of a
   * limit; concurrent calls for the same key and address share one read.
   */
  async limitedEverywhere(address: string, key: string): Promise<number | undefined> {
    const names = [`k:${key}`, `a:${address}`];
    const known = this.limited(names);
    if (known !== undefined || !this.shared) return known;
    const flight = `${key}\n${address}`;
    let read = this.reads.get(flight);
    if (!read) {
      const now = this.now();
      read = this.shared
        .read(names, this.options.windowMs, now)
        .then((counters) => this.learn(names, counters, now))
        .finally(() => this.reads.delete(flight));
      this.reads.set(flight, read);
    }
    await read;
    return this.limited(names);
  }

  /**
   * May a check of `key` from `address` run now on this instance (its failure counts as this
   * instance knows them, and the concurrency cap)? On ok, call `release()` when it has finished.
   */
  admit(address: string, key: string): Admission {
    const limited = this.limited([`k:${key}`, `a:${address}`]);
    if (limited !== undefined) return { ok: false, retryAfterSeconds: limited };
    const running = this.running.get(address) ?? 0;
    if (running >= this.options.maxConcurrentPerAddress) return { ok: false, retryAfterSeconds: 1 };
    this.running.set(address, running + 1);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        const left = (this.running.get(address) ?? 1) - 1;
        if (left <= 0) this.running.delete(address);
        else this.running.set(address, left);
      },
    };
  }

  /** Counts a failed check (a wrong secret, or a key used where its scopes do not reach). */
  async fail(address: string, key: string): Promise<void> {
    const names = [`k:${key}`, `a:${address}`];
    const now = this.now();
    if (!this.shared) {
      for (const name of names) this.count(name, now);
      return;
    }
    this.learn(names, await this.shared.add(names, this.options.windowMs, now), now);
    // Expired counters are deleted by whichever instance counts a failure, at most once a window.
    if (now - this.sweptAt >= this.options.windowMs) {
      this.sweptAt = now;
      await this.shared.sweep(now - this.options.windowMs);
    }
  }

  /** Seconds until the first of `names` over its limit opens again, or undefined. */
  private limited(names: readonly string[]): number | undefined {
    return (
      this.retryAfter(names[0]!, this.options.maxFailuresPerKey) ??
      this.retryAfter(names[1]!, this.options.maxFailuresPerAddress)
    );
  }

  private retryAfter(name: string, limit: number): number | undefined {
    const counter = this.failures.get(name);
    if (!counter) return undefined;
    const now = this.now();
    if (counter.resetAt <= now) {
      this.failures.delete(name);
      return undefined;
    }
    return counter.count >= limit ? Math.max(1, Math.ceil((counter.resetAt - now) / 1000)) : undefined;
  }

  /** Takes the shared counters as this instance's view; a name without an open counter is forgotten. */
  private learn(names: readonly string[], counters: Map<string, Counter>, now: number): void {
    for (const name of names) {
      const counter = counters.get(name);
      if (!counter) {
        this.failures.delete(name);
        continue;
      }
      this.failures.delete(name);
      if (this.failures.size >= this.maxEntries) this.prune(now);
      this.failures.set(name, counter);
    }
  }

  private count(name: string, now: number): void {
    const counter = this.failures.get(name);
    if (counter && counter.resetAt > now) {
      counter.count++;
      return;
    }
    if (counter) this.failures.delete(name);
    if (this.failures.size >= this.maxEntries) this.prune(now);
    this.failures.set(name, { count: 1, resetAt: now + this.options.windowMs });
  }

  /** Drops expired counters; if none had expired, the oldest (Map order is insertion order). */
  private prune(now: number): void {
    for (const [name, counter] of this.failures) if (counter.resetAt <= now) this.failures.delete(name);
    if (this.failures.size < this.maxEntries) return;
    const oldest = this.failures.keys().next();
    if (!oldest.done) this.failures.delete(oldest.value);
  }
}
