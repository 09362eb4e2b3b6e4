import type { SqlDatabase } from '../../../store/sql/types.ts';
import { PerStore, SharedCache, type CacheEntries, type ChangeFeed } from '../../../store/shared-cache.ts';

/** Carries the key of a collection whose documents or definition changed, to every instance. */
const ANSWERS_CHANGED_TOPIC = 'docdb.answers.changed';
/** All answers cached, in characters of their queries and texts (bookkeeping counted as 64 each). */
const ANSWER_CACHE_CHARS = 16 * 1024 * 1024;
/** Larger answers are not cached: they are few, and streamed rather than sent whole. */
const MAX_CACHED_ANSWER_CHARS = 64 * 1024;
/** Queries (request bodies) longer than this are not cached: a cache of long filters would hold little. */
const MAX_CACHED_QUERY_CHARS = 4 * 1024;
const ENTRY_OVERHEAD = 64;

/** The cached answers of one collection, by query. Answers no longer held by the cache are not added to. */
export class CollectionAnswers {
  readonly byQuery = new Map<string, string>();
  chars = ENTRY_OVERHEAD;
  /** Set while the cache holds this object: a change of the collection drops it. */
  held = false;
}

/** Collections' answers, bounded by their total size: past it, everything is dropped (simple, and rare). */
class AnswerEntries implements CacheEntries<CollectionAnswers> {
  private readonly collections = new Map<string, CollectionAnswers>();
  private chars = 0;

  get(key: string): CollectionAnswers | undefined {
    return this.collections.get(key);
  }

  set(key: string, value: CollectionAnswers): void {
    this.delete(key);
    value.held = true;
    this.collections.set(key, value);
    this.chars += value.chars + key.length;
  }

  delete(key: string): void {
    const old = this.collections.get(key);
    if (old === undefined) return;
    old.held = false;
    this.collections.delete(key);
    this.chars -= old.chars + key.length;
  }

  clear(): void {
    for (const answers of this.collections.values()) answers.held = false;
    this.collections.clear();
    this.chars = 0;
  }

  add(answers: CollectionAnswers, query: string, text: string): void {
    if (!answers.held || answers.byQuery.has(query)) return;
    const size = query.length + text.length + ENTRY_OVERHEAD;
    if (this.chars + size > ANSWER_CACHE_CHARS) {
      this.clear();
      return;
    }
    answers.byQuery.set(query, text);
    answers.chars += size;
    this.chars += size;
  }
}

/** The cache of each store, shared by the document stores on it (tests run two apps on one embedded store). */
const answerCaches = new PerStore<FindAnswers>((answers) => answers.close());

/**
 * Answers of finds (the whole NDJSON text of a small answer) by collection and query (the request
 * body as sent), so a repeated lookup costs no query. Every change to a collection's documents, and
 * the drop of one of its indexes or of the collection, goes through `changing`, which drops the
 * collection's answers around it (new defaults apply to later inserts, a new index to later finds:
 * neither changes an answer): here at once, and where other instances write too, on every instance
 * before a hit is trusted (SharedCache's notifier fence), so a client that wrote through one
 * instance never reads an older answer through another. A find that raced a change of its
 * collection adds its answer to a dropped object, where nobody reads it.
 */
export class FindAnswers {
  private readonly entries = new AnswerEntries();
  private readonly shared: SharedCache<CollectionAnswers>;

  private constructor(soleWriter: boolean, feed: ChangeFeed) {
    this.shared = new SharedCache(this.entries, ANSWERS_CHANGED_TOPIC, soleWriter, feed);
  }

  /** The cache of `sql`'s store; `release` it when done. */
  static of(sql: SqlDatabase, feed: ChangeFeed): FindAnswers {
    return answerCaches.take(sql, () => new FindAnswers(sql.soleWriter, feed));
  }

  static release(sql: SqlDatabase): void {
    answerCaches.release(sql);
  }

  /** Stops listening for other instances' changes (the last document store of the store closed). */
  close(): void {
    this.shared.close();
  }

  /** The collection's answers now (possibly a fresh, empty set), to look `query` up in and `remember` into. */
  async answers(collection: string): Promise<CollectionAnswers> {
    return (await this.shared.read(collection, () => Promise.resolve(new CollectionAnswers())))!;
  }

  /** Keeps `text` as the answer to `query`, unless the collection changed since `answers` was read. */
  remember(answers: CollectionAnswers, query: string, text: string): void {
    if (text.length <= MAX_CACHED_ANSWER_CHARS && query.length <= MAX_CACHED_QUERY_CHARS)
      this.entries.add(answers, query, text);
  }

  /** Runs a write to `collection`; its answers are dropped around it (before its caller hears of it). */
  changing<T>(collection: string, write: () => Promise<T>): Promise<T> {
    return this.shared.around(collection, write);
  }
}
