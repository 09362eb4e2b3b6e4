import { createHash } from 'node:crypto';
import { verify } from '@node-rs/bcrypt';
import { caughtUp, type FencedFeed } from './caught-up.ts';

/**
 * The part of the store's notifier a checker needs (the store's `Notifier` satisfies it; the
 * kernel imports nothing from the store).
 */
export interface RevocationFeed extends FencedFeed {
  /** Delivers every message published on `topic` by any instance; returns an unsubscribe. */
  subscribe(topic: string, handler: (message: string) => void): () => void;
  /** Called after messages may have been missed; returns an unsubscribe. */
  onResync(handler: () => void): () => void;
  publish(topic: string, message: string): Promise<void>;
}

/** What a key is stored as: the bcrypt hash of its secret, and what a success is worth. */
export interface StoredCredential<R> {
  secretHash: string;
  value: R;
}

/**
 * The outcome of a check: `malformed` (the precheck refused the pair: no lookup, no bcrypt),
 * `unknown` (no such key), `wrong_secret`, or `ok` with the value.
 */
export type CredentialCheck<V> =
  { status: 'malformed' } | { status: 'unknown' } | { status: 'wrong_secret' } | { status: 'ok'; value: V };

export interface CredentialCheckerOptions<V, R> {
  /** The stored key, or null/undefined when there is none. */
  lookup(key: string): Promise<StoredCredential<R> | null | undefined>;
  /** Builds the value a success is cached as, after bcrypt accepted the secret (default: the stored value). */
  resolve?(stored: R): V | Promise<V>;
  /** A cheap test a pair must pass before any lookup or bcrypt (e.g. UUID-shaped keys and secrets). */
  precheck?(key: string, secret: string): boolean;
  /** How long a success is trusted. */
  ttlMs: number;
  /** The most successes kept; the oldest goes first. */
  maxEntries: number;
  /** The notifier topic revocations arrive on. */
  topic: string;
  /**
   * Revocation message fields (besides `key`, which always selects by key) that select cached
   * values: `{ database: (value) => value.databaseId }` drops, for `{"database":"d1"}`, every
   * success whose value gives "d1". A message that selects nothing known drops everything.
   */
  selectors?: Readonly<Record<string, (value: V) => string>>;
}

/** A revocation: by key, or by one of the checker's selectors (`{ database: id }`). */
export type Revocation = Readonly<Record<string, string>>;

interface Cached<V> {
  key: string;
  value: V;
  expiresAt: number;
}

interface Verification {
  key: string;
  /** Set by a revocation that could concern this check while it runs: its success is not cached. */
  raced: boolean;
}

/**
 * Checks key + secret pairs with bcrypt (off the event loop). A success is cached for at most
 * `ttlMs` under a SHA-256 of key and secret — never the secret itself — and a failure never is.
 * Concurrent checks of one pair share one verification, so a burst costs one bcrypt. A revocation
 * published on the topic (from any instance) drops the selected successes at once, a resync of
 * the feed drops them all, and a check that raced a revocation is not cached. Where other
 * instances revoke too (`feed.crossInstance`), a cached success counts only after a fence of the
 * feed, so a key revoked through any instance is refused by the next request everywhere.
 */
export class CredentialChecker<V, R = V> {
  private readonly cache = new Map<string, Cached<V>>();
  private readonly hashesByKey = new Map<string, Set<string>>();
  private readonly inFlight = new Map<string, { promise: Promise<CredentialCheck<V>>; verification: Verification }>();
  private readonly unsubscribe: (() => void)[];
  /** Number of bcrypt comparisons run (for tests and stats). */
  verifications = 0;

  constructor(
    private readonly feed: RevocationFeed,
    private readonly options: CredentialCheckerOptions<V, R>,
  ) {
    this.unsubscribe = [
      feed.subscribe(options.topic, (message) => this.onRevoked(message)),
      feed.onResync(() => this.forgetAll()),
    ];
  }

  /** The cache key of a pair: a SHA-256 of key and secret, never the secret itself. */
  static pairHash(key: string, secret: string): string {
    return createHash('sha256').update(`${key}\0${secret}`).digest('base64');
  }

  /**
   * A cached success for the pair, synchronously, or undefined (then `check` it). Always undefined
   * where other instances revoke too: there a success is confirmed by `check` after a fence.
   */
  cached(hash: string): V | undefined {
    return this.feed.crossInstance ? undefined : this.unexpired(hash);
  }

  private unexpired(hash: string): V | undefined {
    const cached = this.cache.get(hash);
    if (!cached) return undefined;
    if (cached.expiresAt > Date.now()) return cached.value;
    this.drop(hash, cached.key);
    return undefined;
  }

  /** The verification of this pair already under way, if any (joining it costs no bcrypt). */
  pending(hash: string): Promise<CredentialCheck<V>> | undefined {
    return this.inFlight.get(hash)?.promise;
  }

  check(key: string, secret: string, hash = CredentialChecker.pairHash(key, secret)): Promise<CredentialCheck<V>> {
    if (this.options.precheck && !this.options.precheck(key, secret)) return Promise.resolve({ status: 'malformed' });
    if (this.feed.crossInstance) {
      if (this.cache.has(hash)) return this.checkFenced(key, secret, hash);
    } else {
      const hit = this.unexpired(hash);
      if (hit !== undefined) return Promise.resolve({ status: 'ok', value: hit });
    }
    return this.verifyOnce(key, secret, hash);
  }

  /**
   * A cached success known to be current: at once where this instance alone revokes, else once a
   * fence has applied every revocation sent before the call (undefined if the fence fails).
   */
  async confirmed(hash: string): Promise<V | undefined> {
    if (!this.cache.has(hash) || !(await caughtUp(this.feed))) return undefined;
    return this.unexpired(hash);
  }

  private async checkFenced(key: string, secret: string, hash: string): Promise<CredentialCheck<V>> {
    const hit = await this.confirmed(hash);
    return hit !== undefined ? { status: 'ok', value: hit } : this.verifyOnce(key, secret, hash);
  }

  private verifyOnce(key: string, secret: string, hash: string): Promise<CredentialCheck<V>> {
    const running = this.inFlight.get(hash);
    if (running) return running.promise;
    const verification: Verification = { key, raced: false };
    const promise = this.verify(hash, key, secret, verification).finally(() => this.inFlight.delete(hash));
    this.inFlight.set(hash, { promise, verification });
    return promise;
  }

  private async verify(
    hash: string,
    key: string,
    secret: string,
    verification: Verification,
  ): Promise<CredentialCheck<V>> {
    const stored = await this.options.lookup(key);
    if (!stored) return { status: 'unknown' };
    this.verifications++;
    if (!(await verify(secret, stored.secretHash))) return { status: 'wrong_secret' };
    const value = this.options.resolve ? await this.options.resolve(stored.value) : (stored.value as unknown as V);
    if (!verification.raced) this.remember(hash, key, value);
    return { status: 'ok', value };
  }

  private remember(hash: string, key: string, value: V): void {
    if (this.cache.size >= this.options.maxEntries) {
      const oldest = this.cache.entries().next().value;
      if (oldest) this.drop(oldest[0], oldest[1].key);
    }
    this.cache.set(hash, { key, value, expiresAt: Date.now() + this.options.ttlMs });
    let hashes = this.hashesByKey.get(key);
    if (!hashes) this.hashesByKey.set(key, (hashes = new Set()));
    hashes.add(hash);
  }

  private drop(hash: string, key: string): void {
    this.cache.delete(hash);
    const hashes = this.hashesByKey.get(key);
    hashes?.delete(hash);
    if (hashes?.size === 0) this.hashesByKey.delete(key);
  }

  /** Drops this instance's cached successes of `key`. */
  forgetKey(key: string): void {
    for (const { verification } of this.inFlight.values()) if (verification.key === key) verification.raced = true;
    for (const hash of this.hashesByKey.get(key) ?? []) this.cache.delete(hash);
    this.hashesByKey.delete(key);
  }

  /** Drops this instance's cached successes whose value `matches`. */
  forgetWhere(matches: (value: V) => boolean): void {
    // The value of a check under way is not known yet: none of them is cached.
    for (const { verification } of this.inFlight.values()) verification.raced = true;
    for (const [hash, cached] of this.cache) if (matches(cached.value)) this.drop(hash, cached.key);
  }

  forgetAll(): void {
    for (const { verification } of this.inFlight.values()) verification.raced = true;
    this.cache.clear();
    this.hashesByKey.clear();
  }

  /** Forgets what `revocation` selects here at once, then tells every instance (call after the change committed). */
  async revoke(revocation: Revocation): Promise<void> {
    this.apply(revocation);
    await this.feed.publish(this.options.topic, JSON.stringify(revocation));
  }

  private onRevoked(message: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(message);
    } catch {
      // Unreadable: forget everything below.
    }
    this.apply(typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {});
  }

  private apply(revocation: Readonly<Record<string, unknown>>): void {
    if (typeof revocation.key === 'string') return this.forgetKey(revocation.key);
    for (const [field, select] of Object.entries(this.options.selectors ?? {})) {
      const wanted = revocation[field];
      if (typeof wanted === 'string') return this.forgetWhere((value) => select(value) === wanted);
    }
    this.forgetAll();
  }

  /** Unsubscribes from the feed and forgets everything. */
  close(): void {
    for (const stop of this.unsubscribe.splice(0)) stop();
    this.forgetAll();
  }
}
