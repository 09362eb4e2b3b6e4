/**
 * Bounds what anonymous callers can make the gateway spend on bcrypt (issue 17, item 13): each
 * uncached API-key check costs a bcrypt comparison (~50 ms of a thread), so a flood of wrong
 * secrets against one key could starve everyone's logins. Per client address at most
 * `maxConcurrentPerAddress` checks run at once; failed checks are counted per key and per address
 * in a fixed window, and past the limit no further check of that key (or from that address) runs
 * until the window ends. Cached successes never reach the guard, so a key in use keeps working.
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

export class CredentialGuard {
  private readonly failures = new Map<string, Counter>();
  private readonly running = new Map<string, number>();
  private readonly maxEntries: number;

  constructor(
    private readonly options: CredentialGuardOptions = DEFAULT_GUARD,
    private readonly now: () => number = Date.now,
  ) {
    this.maxEntries = options.maxEntries ?? 100_000;
  }

  /** May a check of `key` from `address` run now? On ok, call `release()` when it has finished. */
  admit(address: string, key: string): Admission {
    const limited =
      this.retryAfter(`k:${key}`, this.options.maxFailuresPerKey) ??
      this.retryAfter(`a:${address}`, this.options.maxFailuresPerAddress);
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
  fail(address: string, key: string): void {
    this.count(`k:${key}`);
    this.count(`a:${address}`);
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

  private count(name: string): void {
    const now = this.now();
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
