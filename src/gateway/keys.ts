import { createHash } from 'node:crypto';
import { verify } from '@node-rs/bcrypt';
import type { SqlConnection } from '../store/db.ts';
import type { Notifier } from '../store/notifier/types.ts';
import { findApiKey, KEY_REVOKED_TOPIC, type Scope } from '../services/apikeys/index.ts';
import { findUserById } from '../services/auth/index.ts';
import type { Identity } from '../core/identity.ts';

export interface VerifiedKey {
  key: string;
  owner: string;
  scopes: Scope[];
  /** The owner as the identity JSON shows it (looked up once per verification). */
  user: Identity['user'];
  /** The identity JSON for requests outside projects when no host rule applies, built once. */
  plainIdentityJson?: string;
}

export type KeyCheck = { status: 'unknown' } | { status: 'wrong_secret' } | { status: 'ok'; key: VerifiedKey };

interface CachedCheck {
  key: VerifiedKey;
  expiresAt: number;
}

const MAX_ENTRIES = 10_000;

/**
 * Checks `Api-Key` + `Api-Secret` pairs (decisions §9): the key is looked up, the secret compared
 * with bcrypt off the event loop. A success is cached for at most `ttlMs` under a SHA-256 of key
 * and secret — never the secret itself — and a failure never is. Concurrent checks of the same
 * pair share one verification, so a burst costs one bcrypt. A revocation published on the
 * notifier (from any instance) evicts the key at once; after a notifier reconnect everything is
 * dropped, since revocations may have been missed.
 */
export class ApiKeyVerifier {
  private readonly cache = new Map<string, CachedCheck>();
  private readonly hashesByKey = new Map<string, Set<string>>();
  private readonly inFlight = new Map<string, Promise<KeyCheck>>();
  /** Bumped on every eviction of a key, so a check that raced a revocation is not cached. */
  private readonly revocations = new Map<string, number>();
  private readonly unsubscribe: (() => void)[] = [];
  /** Number of bcrypt comparisons run (for tests and stats). */
  verifications = 0;

  constructor(
    private readonly connection: SqlConnection,
    notifier: Notifier,
    private readonly ttlMs = 60_000,
  ) {
    this.unsubscribe.push(
      notifier.subscribe(KEY_REVOKED_TOPIC, (message) => {
        try {
          const { key } = JSON.parse(message) as { key?: unknown };
          if (typeof key === 'string') this.evict(key);
        } catch {
          this.clear();
        }
      }),
      notifier.onResync(() => this.clear()),
    );
  }

  /** The cache key of a pair: a SHA-256 of key and secret, never the secret itself. */
  static pairHash(key: string, secret: string): string {
    return createHash('sha256').update(`${key}\0${secret}`).digest('base64');
  }

  /** A cached success for the pair, synchronously, or undefined (then `check` it). */
  cached(hash: string): VerifiedKey | undefined {
    const cached = this.cache.get(hash);
    if (!cached) return undefined;
    if (cached.expiresAt > Date.now()) return cached.key;
    this.drop(hash, cached.key.key);
    return undefined;
  }

  /** The verification of this pair already under way, if any (joining it costs no bcrypt). */
  pending(hash: string): Promise<KeyCheck> | undefined {
    return this.inFlight.get(hash);
  }

  async check(key: string, secret: string, hash = ApiKeyVerifier.pairHash(key, secret)): Promise<KeyCheck> {
    const hit = this.cached(hash);
    if (hit) return { status: 'ok', key: hit };
    let pending = this.inFlight.get(hash);
    if (!pending) {
      pending = this.verify(hash, key, secret).finally(() => this.inFlight.delete(hash));
      this.inFlight.set(hash, pending);
    }
    return pending;
  }

  private async verify(hash: string, key: string, secret: string): Promise<KeyCheck> {
    const generation = this.revocations.get(key) ?? 0;
    const stored = await findApiKey(this.connection, key);
    if (!stored) return { status: 'unknown' };
    this.verifications++;
    if (!(await verify(secret, stored.secretHash))) return { status: 'wrong_secret' };
    const owner = await findUserById(this.connection, stored.owner);
    const user: Identity['user'] = { id: stored.owner };
    if (owner?.nick) user.nick = owner.nick;
    if (owner?.email) user.email = owner.email;
    if (owner?.picture) user.picture = owner.picture;
    const verified: VerifiedKey = { key: stored.key, owner: stored.owner, scopes: stored.scopes, user };
    if ((this.revocations.get(key) ?? 0) === generation) this.remember(hash, verified);
    return { status: 'ok', key: verified };
  }

  private remember(hash: string, verified: VerifiedKey): void {
    if (this.cache.size >= MAX_ENTRIES) {
      const [oldestHash, oldest] = this.cache.entries().next().value as [string, CachedCheck];
      this.drop(oldestHash, oldest.key.key);
    }
    this.cache.set(hash, { key: verified, expiresAt: Date.now() + this.ttlMs });
    let hashes = this.hashesByKey.get(verified.key);
    if (!hashes) this.hashesByKey.set(verified.key, (hashes = new Set()));
    hashes.add(hash);
  }

  private drop(hash: string, key: string): void {
    this.cache.delete(hash);
    const hashes = this.hashesByKey.get(key);
    hashes?.delete(hash);
    if (hashes?.size === 0) this.hashesByKey.delete(key);
  }

  /** Forgets every cached success of `key` (it was revoked). */
  evict(key: string): void {
    this.revocations.set(key, (this.revocations.get(key) ?? 0) + 1);
    for (const hash of this.hashesByKey.get(key) ?? []) this.cache.delete(hash);
    this.hashesByKey.delete(key);
  }

  clear(): void {
    for (const key of this.hashesByKey.keys()) this.revocations.set(key, (this.revocations.get(key) ?? 0) + 1);
    this.cache.clear();
    this.hashesByKey.clear();
  }

  close(): void {
    for (const stop of this.unsubscribe) stop();
  }
}

/** Whether a verified key may be used for this request (apikeys.md §2.3), and the host metadata. */
export function matchScopes(scopes: readonly Scope[], host: string, projectId: string | null): { ok: boolean; hostMetadata?: string } {
  if (scopes.length === 0) return { ok: true };
  for (const scope of scopes) {
    const projectOk = scope.projects.length === 0 || (projectId !== null && scope.projects.includes(projectId));
    if (!projectOk) continue;
    const rules = Object.entries(scope.host_rules);
    if (rules.length === 0) return { ok: true };
    const rule = rules.find(([ruleHost]) => ruleHost.toLowerCase() === host);
    if (rule) return { ok: true, hostMetadata: rule[1] };
  }
  return { ok: false };
}
