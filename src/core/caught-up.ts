/** A change feed that can tell whether this instance has every change announced so far. */
export interface FencedFeed {
  /** True when other instances announce changes too: a cache trusts an entry only after `fence`. */
  readonly crossInstance: boolean;
  /** Resolves once every change announced before the call has arrived here; rejects when that cannot be known. */
  fence(): Promise<void>;
}

/**
 * True once this instance has applied every change announced before the call: at once where no
 * other instance announces any, after a fence where others do; false when that cannot be known
 * (then read the database, not a cache). The store's `Notifier` is such a feed.
 */
export function caughtUp(feed: FencedFeed): Promise<boolean> {
  if (!feed.crossInstance) return Promise.resolve(true);
  return feed.fence().then(
    () => true,
    () => false,
  );
}
