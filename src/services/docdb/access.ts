import type { FastifyRequest } from 'fastify';
import { CredentialChecker } from '../../core/credentials.ts';
import { IDENTITY_HEADER, ownerOrKeyCredentials, parseIdentity, requireIdentity } from '../../core/identity.ts';
import { isUuidV4 } from '../../core/ids.ts';
import type { Notifier } from '../../store/notifier/types.ts';
import { DocdbErrors } from './errors.ts';
import type { DatabaseRecord, DatabaseRepository } from './repository/index.ts';

/**
 * Published when database keys stop existing: `{"key":…}` for one deleted key, `{"database":…}`
 * for every key of a deleted database. Every instance drops its cached checks of them.
 */
export const DOCDB_KEYS_REVOKED_TOPIC = 'docdb.keys.revoked';

export const API_KEY_HEADER = 'api-key';
export const API_SECRET_HEADER = 'api-secret';

/** How long a successful key check is trusted (README: Access: at most 60 s). */
const KEY_CHECK_TTL_MS = 60_000;
const MAX_CACHED_CHECKS = 10_000;

/**
 * Who may touch a database (README: Access). Owners are recognised by the gateway's identity
 * header; database keys by `Api-Key` + `Api-Secret`, checked by the shared checker
 * (`core/credentials.ts`): bcrypt off the event loop, UUID-shaped keys and secrets only.
 *
 * A successful key check is cached for at most 60 s under a SHA-256 of key and secret (never the
 * secret itself); failures never are, and concurrent checks of one pair share one bcrypt. A key
 * stops working at once everywhere: the database record checked on every request (cached, and
 * current on every instance: repository/databases.ts) lists the keys it still has, so a deleted key of this database fails even on an instance whose cache still holds
 * it; a cached key of another database is looked up again before the 403; and the revocation
 * published on the notifier drops the cached checks on every instance (all of them after a
 * notifier reconnect, when messages may have been missed).
 */
export class DocdbAccess {
  /** Cached successes are worth the key's database id. */
  private readonly keys: CredentialChecker<string>;

  constructor(
    private readonly databases: DatabaseRepository,
    notifier: Notifier,
    ttlMs = KEY_CHECK_TTL_MS,
  ) {
    this.keys = new CredentialChecker<string>(notifier, {
      lookup: async (key) => {
        const stored = await this.databases.findKey(key);
        return stored && { secretHash: stored.secretHash, value: stored.databaseId };
      },
      // Keys and secrets are UUID v4 generated here; anything else cannot match (and costs no bcrypt).
      precheck: (key, secret) => isUuidV4(key) && isUuidV4(secret),
      ttlMs,
      maxEntries: MAX_CACHED_CHECKS,
      topic: DOCDB_KEYS_REVOKED_TOPIC,
      selectors: { database: (databaseId) => databaseId },
    });
  }

  /** Number of bcrypt comparisons run (for tests). */
  get verifications(): number {
    return this.keys.verifications;
  }

  /** Identity-only endpoints (list/create databases, /v1/debug/dbs): the caller's user id, or 401. */
  requireUser(request: FastifyRequest): string {
    return requireIdentity(request).user.id;
  }

  /** The caller's user id when the request carries a usable identity, else null. */
  userOf(request: FastifyRequest): string | null {
    return parseIdentity(request.headers[IDENTITY_HEADER])?.user.id ?? null;
  }

  /** The decision procedure for a database-scoped request (README: Access): the database, or 401/403/404. */
  async authorize(request: FastifyRequest, databaseId: string): Promise<DatabaseRecord> {
    // 1 and 2. No credentials at all, or an identity header that cannot be used.
    const { identity, apiKey } = ownerOrKeyCredentials(request);
    // 3. Unknown database.
    const database = await this.databases.get(databaseId);
    if (!database) throw DocdbErrors.databaseNotFound();
    // 4. An owner.
    if (identity && database.owners.includes(identity.user.id)) return database;
    // 5. A database key.
    if (apiKey !== undefined) {
      const secret = request.headers[API_SECRET_HEADER];
      if (typeof apiKey !== 'string' || typeof secret !== 'string') throw DocdbErrors.badApiKey();
      const check = await this.keys.check(apiKey, secret);
      if (check.status !== 'ok') throw DocdbErrors.badApiKey();
      if (check.value === database.id) {
        // Deleted since it was cached: the record just read no longer lists it.
        if (!database.api_keys.includes(apiKey)) {
          this.forgetKey(apiKey);
          throw DocdbErrors.badApiKey();
        }
        return database;
      }
      // A key of another database, unless it was deleted since it was cached.
      const stored = await this.databases.findKey(apiKey);
      if (!stored) {
        this.forgetKey(apiKey);
        throw DocdbErrors.badApiKey();
      }
      throw DocdbErrors.keyOfAnotherDatabase();
    }
    // 6. An identity that is not an owner.
    throw DocdbErrors.notOwner();
  }

  /** Drops this instance's cached checks of `key`. */
  forgetKey(key: string): void {
    this.keys.forgetKey(key);
  }

  /** Drops this instance's cached checks of every key of `databaseId`. */
  forgetDatabase(databaseId: string): void {
    this.keys.forgetWhere((cached) => cached === databaseId);
  }

  forgetAll(): void {
    this.keys.forgetAll();
  }

  /**
   * A key was deleted: forget it here at once, then tell every instance. Call after the delete
   * committed. A failed publish rejects (the caller logs it; the delete stands, and the record
   * check in `authorize` already refuses the key everywhere).
   */
  async revokeKey(key: string): Promise<void> {
    await this.keys.revoke({ key });
  }

  /** A database was deleted with all its keys: as `revokeKey`, for each of them. */
  async revokeDatabase(databaseId: string): Promise<void> {
    await this.keys.revoke({ database: databaseId });
  }

  close(): void {
    this.keys.close();
  }
}
