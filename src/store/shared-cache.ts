import { caughtUp, type Notifier } from './notifier/types.ts';

/** Where a `SharedCache` keeps its entries (a `TextCache`, a bounded map…). */
export interface CacheEntries<V> {
  get(key: string): V | undefined;
  set(key: string, value: V): void;
  delete(key: string): void;
  clear(): void;
}

/** The part of the store's notifier a shared cache needs. */
export type ChangeFeed = Pick<Notifier, 'publish' | 'subscribe' | 'onResync' | 'fence' | 'crossInstance'>;

/** The message that drops every entry (keys are never empty). */
const EVERYTHING = '';

/** Keys whose changes are remembered while reads are in flight; past this, any change counts as a change of every key. */
const MAX_TRACKED_CHANGES = 10_000;

/**
 * A read cache that stays right when other instances write the same database (root README: What
 * instances share). Where this process is the database's only writer (the embedded store) a
 * committed write updates the entry in place. Where other instances write too (PostgreSQL), a
 * write drops the local entry and publishes its key on the notifier `topic`, so every instance
 * drops its copy when the message arrives, and a hit is served only after a notifier fence: every
 * change announced before the read began has been applied by then, so a client that wrote through
 * one instance reads its write through any other. A notifier that lost its connection clears
 * everything when it is back, and while it is away no hit is trusted. A read that raced a write or
 * an announced change of its key (or of every key) does not cache what it read; reads of other keys
 * still do, so a steady stream of writes does not empty the cache.
 */
export class SharedCache<V> {
  /** Bumped by every local write and every announced change. */
  private stamp = 0;
  /** The stamp of the last change of every key (a clear, a write of unknown keys). */
  private everythingAt = 0;
  /** The stamp of each key's last change, kept only while some read is in flight. */
  private readonly changedAt = new Map<string, number>();
  /** Reads loading from the database now. */
  private loading = 0;
  private readonly feed: ChangeFeed | null;
  private readonly unsubscribe: (() => void)[] = [];

  /** `feed` is required unless `soleWriter`. */
  constructor(
    private readonly entries: CacheEntries<V>,
    private readonly topic: string,
    soleWriter: boolean,
    feed?: ChangeFeed,
  ) {
    if (!soleWriter && !feed) throw new Error(`a shared database needs a change feed for the ${topic} cache`);
    this.feed = soleWriter ? null : feed!;
    if (this.feed) {
      this.unsubscribe.push(
        this.feed.subscribe(topic, (key) => this.drop(key)),
        this.feed.onResync(() => this.drop(EVERYTHING)),
      );
    }
  }

  /** Notes a change of `key` (EVERYTHING: of every key) for the reads in flight. */
  private changed(key: string): void {
    this.stamp++;
    if (key === EVERYTHING || this.changedAt.size >= MAX_TRACKED_CHANGES) {
      this.everythingAt = this.stamp;
      this.changedAt.clear();
    } else if (this.loading > 0) {
      // A read that starts later takes a later stamp: only reads in flight need to know.
      this.changedAt.set(key, this.stamp);
    }
  }

  private drop(key: string): void {
    this.changed(key);
    if (key === EVERYTHING) this.entries.clear();
    else this.entries.delete(key);
  }

  /** The cached value, or what `load` reads (null: nothing to cache), cached unless a change of its key raced it. */
  async read<T extends V>(key: string, load: () => Promise<T | null>): Promise<V | null> {
    const cached = this.entries.get(key);
    if (cached !== undefined) {
      if (!this.feed) return cached;
      // Caught up with every change announced before the read: what is still here is current.
      const current = (await caughtUp(this.feed)) ? this.entries.get(key) : undefined;
      if (current !== undefined) return current;
    }
    const before = this.stamp;
    this.loading++;
    try {
      const value = await load();
      if (value !== null && this.everythingAt <= before && (this.changedAt.get(key) ?? 0) <= before)
        this.entries.set(key, value);
      return value;
    } finally {
      if (--this.loading === 0) this.changedAt.clear();
    }
  }

  /**
   * Call before a write of `key` starts (undefined: of any number of keys), so that a read racing
   * it does not cache what it read before the commit.
   */
  writing(key?: string): void {
    this.changed(key ?? EVERYTHING);
  }

  /**
   * Runs `write`, a write of `key`: `writing` before it and `written` (the entry dropped) after it,
   * however it ends, so its caller hears of it only once every instance will read it afresh.
   */
  async around<T>(key: string, write: () => Promise<T>): Promise<T> {
    this.writing(key);
    try {
      return await write();
    } finally {
      await this.written(key);
    }
  }

  /**
   * After a committed write of `key` (`value` null: deleted, or unknown; `key` undefined: any
   * number of keys). Settles once the change has been announced to every instance.
   */
  async written(key: string | undefined, value: V | null = null): Promise<void> {
    const message = key ?? EVERYTHING;
    if (!this.feed) {
      this.changed(message);
      if (key === undefined) this.entries.clear();
      else if (value === null) this.entries.delete(key);
      else this.entries.set(key, value);
      return;
    }
    // Another instance's write of the same key may be announced before this one's promise
    // settles, so the local entry is dropped, not replaced: the next read fetches the newest.
    this.drop(message);
    await this.feed.publish(this.topic, message);
  }

  /** Stops listening for other instances' changes. */
  close(): void {
    for (const stop of this.unsubscribe.splice(0)) stop();
  }
}

/**
 * One cache per store, shared by the repositories on it: several apps in one process on one store
 * (the tests' instances on one embedded store) then see each other's writes. Each repository
 * `take`s it once and `release`s it once; the last release closes it.
 */
export class PerStore<T> {
  private readonly held = new WeakMap<object, { value: T; users: number }>();

  constructor(private readonly close: (value: T) => void) {}

  take(store: object, make: () => T): T {
    let shared = this.held.get(store);
    if (!shared) {
      shared = { value: make(), users: 0 };
      this.held.set(store, shared);
    }
    shared.users++;
    return shared.value;
  }

  release(store: object): void {
    const shared = this.held.get(store);
    if (!shared || --shared.users > 0) return;
    this.close(shared.value);
    this.held.delete(store);
  }
}
