import type { Notifier } from './notifier/types.ts';

/** Where a `SharedCache` keeps its entries (a `TextCache`, a bounded map…). */
export interface CacheEntries<V> {
  get(key: string): V | undefined;
  set(key: string, value: V): void;
  delete(key: string): void;
  clear(): void;
}

/** The part of the store's notifier a shared cache needs. */
export type ChangeFeed = Pick<Notifier, 'publish' | 'subscribe' | 'onResync'>;

/** The message that drops every entry (keys are never empty). */
const EVERYTHING = '';

/** How long a write waits for its own announcement to come back before it is answered anyway. */
const ECHO_WAIT_MS = 1_000;

/**
 * A read cache that stays right when other instances write the same database (root README: What
 * instances share). Where this process is the database's only writer (the embedded store) a
 * committed write updates the entry in place. Where other instances write too (PostgreSQL), a
 * write drops the local entry and publishes its key on the notifier `topic`, so every instance
 * drops its copy when the message arrives; a notifier that lost its connection clears everything
 * when it is back, as messages may have been missed. A read that raced a write or an announced
 * change does not cache what it read.
 *
 * The write is answered only once its own message has come back to this instance (at most
 * ECHO_WAIT_MS): PostgreSQL hands a notification to every listening session at the same moment, so
 * by then the other instances' connections have it too, before the writer's client can ask one of
 * them (root README: What instances share).
 */
export class SharedCache<V> {
  /** Bumped by every local write and every announced change. */
  private changes = 0;
  private readonly feed: ChangeFeed | null;
  private readonly unsubscribe: (() => void)[] = [];
  /** Writes waiting for their announcement to come back, by key. */
  private readonly echoes = new Map<string, (() => void)[]>();

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
        this.feed.subscribe(topic, (key) => {
          this.drop(key);
          const waiting = this.echoes.get(key);
          if (waiting === undefined) return;
          this.echoes.delete(key);
          for (const resume of waiting) resume();
        }),
        this.feed.onResync(() => this.drop(EVERYTHING)),
      );
    }
  }

  private drop(key: string): void {
    this.changes++;
    if (key === EVERYTHING) this.entries.clear();
    else this.entries.delete(key);
  }

  /** The cached value, or what `load` reads (null: nothing to cache), cached unless a change raced it. */
  async read<T extends V>(key: string, load: () => Promise<T | null>): Promise<V | null> {
    const cached = this.entries.get(key);
    if (cached !== undefined) return cached;
    const before = this.changes;
    const value = await load();
    if (value !== null && this.changes === before) this.entries.set(key, value);
    return value;
  }

  /** Call before a write starts, so that a read racing it does not cache what it read before the commit. */
  writing(): void {
    this.changes++;
  }

  /**
   * After a committed write of `key` (`value` null: deleted, or unknown; `key` undefined: any
   * number of keys). Settles once other instances have been told.
   */
  async written(key: string | undefined, value: V | null = null): Promise<void> {
    this.changes++;
    if (!this.feed) {
      if (key === undefined) this.entries.clear();
      else if (value === null) this.entries.delete(key);
      else this.entries.set(key, value);
      return;
    }
    // Another instance's write of the same key may be announced before this one's promise
    // settles, so the local entry is dropped, not replaced: the next read fetches the newest.
    const message = key ?? EVERYTHING;
    this.drop(message);
    let resume!: () => void;
    let timer: NodeJS.Timeout | undefined;
    const echoed = new Promise<void>((resolve) => {
      resume = resolve;
      timer = setTimeout(resolve, ECHO_WAIT_MS);
    });
    const waiting = this.echoes.get(message) ?? [];
    waiting.push(resume);
    this.echoes.set(message, waiting);
    try {
      await this.feed.publish(this.topic, message);
      await echoed;
    } finally {
      clearTimeout(timer);
      const left = this.echoes.get(message)?.filter((other) => other !== resume);
      if (left?.length) this.echoes.set(message, left);
      else this.echoes.delete(message);
    }
  }

  /** Stops listening for other instances' changes. */
  close(): void {
    for (const stop of this.unsubscribe.splice(0)) stop();
    for (const waiting of this.echoes.values()) for (const resume of waiting) resume();
    this.echoes.clear();
  }
}
