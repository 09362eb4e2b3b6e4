import { createHash } from 'node:crypto';
import { verify } from '@node-rs/bcrypt';
import type { FastifyRequest } from 'fastify';
import { forbidden, notFound, unauthorized } from '../../core/errors.ts';
import { IDENTITY_HEADER, ownerOrKeyCredentials, parseIdentity, requireIdentity } from '../../core/identity.ts';
import { isUuidV4 } from '../../core/ids.ts';
import type { Notifier } from '../../store/notifier/types.ts';
import type { DatabaseRecord, DatabaseRepository } from './databases.ts';

/**
 * Published when database keys stop existing: `{"key":…}` for one deleted key, `{"database":…}`
 * for every key of a deleted database. Every instance drops its cached checks of them.
 */
export const DOCDB_KEYS_REVOKED_TOPIC = 'docdb.keys.revoked';

export const API_KEY_HEADER = 'api-key';
export const API_SECRET_HEADER = 'api-secret';

/** How long a successful key check is trusted (docdb.md §2: at most 60 s). */
const KEY_CHECK_TTL_MS = 60_000;
const MAX_CACHED_CHECKS = 10_000;

type KeyCheck = { status: 'unknown' } | { status: 'wrong_secret' } | { status: 'ok'; databaseId: string };

interface CachedCheck {
  key: string;
  databaseId: string;
  expiresAt: number;
}

const BAD_KEY_MESSAGE = 'unknown API key or wrong secret';

/**
 * Who may touch a database (docdb.md §2). Owners are recognised by the gateway's identity header;
 * database keys by `Api-Key` + `Api-Secret`, the secret compared with bcrypt off the event loop.
 *
 * A successful key check is cached for at most 60 s under a SHA-256 of key and secret (never the
 * secret itself); failures never are, and concurrent checks of one pair share one bcrypt. A key
 * stops working at once everywhere: the database record read on every request lists the keys it
 * still has, so a deleted key of this database fails even on an instance whose cache still holds
 * it; a cached key of another database is looked up again before the 403; and the revocation
 * published on the notifier drops the cached checks on every instance (all of them after a
 * notifier reconnect, when messages may have been missed).
 */
export class DocdbAccess {
  private readonly checks = new Map<string, CachedCheck>();
  private readonly inFlight = new Map<string, Promise<KeyCheck>>();
  /** Bumped by every eviction, so that a check that raced a revocation is not cached. */
  private epoch = 0;
  private readonly unsubscribe: (() => void)[] = [];
  /** Number of bcrypt comparisons run (for tests). */
  verifications = 0;

  constructor(
    private readonly databases: DatabaseRepository,
    private readonly notifier: Notifier,
    private readonly ttlMs = KEY_CHECK_TTL_MS,
  ) {
    this.unsubscribe.push(
      notifier.subscribe(DOCDB_KEYS_REVOKED_TOPIC, (message) => this.onRevoked(message)),
      notifier.onResync(() => this.forgetAll()),
    );
  }

  /** Identity-only endpoints (list/create databases, /v1/debug/dbs): the caller's user id, or 401. */
  requireUser(request: FastifyRequest): string {
    return requireIdentity(request).user.id;
  }

  /** The caller's user id when the request carries a usable identity, else null. */
  userOf(request: FastifyRequest): string | null {
    return parseIdentity(request.headers[IDENTITY_HEADER])?.user.id ?? null;
  }

  /** docdb.md §2 decision procedure for a database-scoped request: returns the database or throws 401/403/404. */
  async authorize(request: FastifyRequest, databaseId: string): Promise<DatabaseRecord> {
    // 1 and 2. No credentials at all, or an identity header that cannot be used.
    const { identity, apiKey } = ownerOrKeyCredentials(request);
    // 3. Unknown database.
    const database = await this.databases.get(databaseId);
    if (!database) throw notFound('database not found');
    // 4. An owner.
    if (identity && database.owners.includes(identity.user.id)) return database;
    // 5. A database key.
    if (apiKey !== undefined) {
      const secret = request.headers[API_SECRET_HEADER];
      if (typeof apiKey !== 'string' || typeof secret !== 'string') throw unauthorized(BAD_KEY_MESSAGE);
      const check = await this.checkKey(apiKey, secret);
      if (check.status !== 'ok') throw unauthorized(BAD_KEY_MESSAGE);
      if (check.databaseId === database.id) {
        // Deleted since it was cached: the record just read no longer lists it.
        if (!database.api_keys.includes(apiKey)) {
          this.forgetKey(apiKey);
          throw unauthorized(BAD_KEY_MESSAGE);
        }
        return database;
      }
      // A key of another database, unless it was deleted since it was cached.
      const stored = await this.databases.findKey(apiKey);
      if (!stored) {
        this.forgetKey(apiKey);
        throw unauthorized(BAD_KEY_MESSAGE);
      }
      throw forbidden('this API key belongs to another database');
    }
    // 6. An identity that is not an owner.
    throw forbidden('not an owner of this database');
  }

  /** Checks a key and secret, from the cache when a success for the pair is recent enough. */
  private async checkKey(key: string, secret: string): Promise<KeyCheck> {
    // Keys and secrets are UUID v4 generated here; anything else cannot match (and costs no bcrypt).
    if (!isUuidV4(key)) return { status: 'unknown' };
    const hash = pairHash(key, secret);
    const cached = this.checks.get(hash);
    if (cached) {
      if (cached.expiresAt > Date.now()) return { status: 'ok', databaseId: cached.databaseId };
      this.checks.delete(hash);
    }
    let pending = this.inFlight.get(hash);
    if (!pending) {
      pending = this.verifyKey(hash, key, secret).finally(() => this.inFlight.delete(hash));
      this.inFlight.set(hash, pending);
    }
    return pending;
  }

  private async verifyKey(hash: string, key: string, secret: string): Promise<KeyCheck> {
    const epoch = this.epoch;
    const stored = await this.databases.findKey(key);
    if (!stored) return { status: 'unknown' };
    if (!isUuidV4(secret)) return { status: 'wrong_secret' };
    this.verifications++;
    if (!(await verify(secret, stored.secretHash))) return { status: 'wrong_secret' };
    if (this.epoch === epoch) {
      if (this.checks.size >= MAX_CACHED_CHECKS) {
        const oldest = this.checks.keys().next().value;
        if (oldest !== undefined) this.checks.delete(oldest);
      }
      this.checks.set(hash, { key, databaseId: stored.databaseId, expiresAt: Date.now() + this.ttlMs });
    }
    return { status: 'ok', databaseId: stored.databaseId };
  }

  /** Drops this instance's cached checks of `key`. */
  forgetKey(key: string): void {
    this.epoch++;
    for (const [hash, check] of this.checks) if (check.key === key) this.checks.delete(hash);
  }

  /** Drops this instance's cached checks of every key of `databaseId`. */
  forgetDatabase(databaseId: string): void {
    this.epoch++;
    for (const [hash, check] of this.checks) if (check.databaseId === databaseId) this.checks.delete(hash);
  }

  forgetAll(): void {
    this.epoch++;
    this.checks.clear();
  }

  /**
   * A key was deleted: forget it here at once, then tell every instance. Call after the delete
   * committed. A failed publish rejects (the caller logs it; the delete stands, and the record
   * check in `authorize` already refuses the key everywhere).
   */
  async revokeKey(key: string): Promise<void> {
    this.forgetKey(key);
    await this.notifier.publish(DOCDB_KEYS_REVOKED_TOPIC, JSON.stringify({ key }));
  }

  /** A database was deleted with all its keys: as `revokeKey`, for each of them. */
  async revokeDatabase(databaseId: string): Promise<void> {
    this.forgetDatabase(databaseId);
    await this.notifier.publish(DOCDB_KEYS_REVOKED_TOPIC, JSON.stringify({ database: databaseId }));
  }

  private onRevoked(message: string): void {
    let event: { key?: unknown; database?: unknown } | null = null;
    try {
      const parsed: unknown = JSON.parse(message);
      if (typeof parsed === 'object' && parsed !== null) event = parsed as { key?: unknown; database?: unknown };
    } catch {
      // Unreadable: forget everything below.
    }
    if (typeof event?.key === 'string') this.forgetKey(event.key);
    else if (typeof event?.database === 'string') this.forgetDatabase(event.database);
    else this.forgetAll();
  }

  close(): void {
    for (const stop of this.unsubscribe.splice(0)) stop();
    this.forgetAll();
  }
}

/** The cache key of a pair: a SHA-256 of key and secret, never the secret itself. */
function pairHash(key: string, secret: string): string {
  return createHash('sha256').update(`${key}\0${secret}`).digest('base64');
}
