import type { FastifyRequest } from 'fastify';
import { CredentialChecker } from '../../core/credentials.ts';
import { ownerOrKeyCredentials, requireIdentity } from '../../core/identity.ts';
import { isUuidV4 } from '../../core/ids.ts';
import type { Notifier } from '../../store/notifier/types.ts';
import { LogsErrors } from './errors.ts';
import type { LoggerRepository } from './repository.ts';

/** Published when logger keys stop existing (`{"key":…}` or `{"logger":…}`): every instance forgets them. */
export const LOGS_KEYS_REVOKED_TOPIC = 'logs.keys.revoked';

const API_KEY_HEADER = 'api-key';
const API_SECRET_HEADER = 'api-secret';
/** A successful key check is trusted this long (the key row is still re-read on every request). */
const KEY_CHECK_TTL_MS = 60_000;
const MAX_CACHED_CHECKS = 10_000;

/** What a logger-scoped request was allowed as. */
export interface Access {
  loggerId: string;
  /** The caller's user id when it came with a usable identity. */
  userId: string | null;
}

/**
 * Who may touch a logger (README: access), following docdb's access rules: owners by the gateway
 * identity, keys by `Api-Key` + `Api-Secret` checked by the shared checker (`core/credentials.ts`):
 * bcrypt, successes cached under a SHA-256 of key and secret (never the secret), revocations on
 * the notifier (`{"key":…}` or `{"logger":…}`) and resyncs drop them. Here: the key row is read
 * on every request that a cached success would answer, so a deleted key fails at once on every
 * instance.
 */
export class LogsAccess {
  /** Cached successes are worth the key's logger id. */
  private readonly keys: CredentialChecker<string>;

  constructor(
    private readonly loggers: LoggerRepository,
    notifier: Notifier,
  ) {
    this.keys = new CredentialChecker<string>(notifier, {
      lookup: async (key) => {
        const stored = await this.loggers.findKey(key);
        return stored && { secretHash: stored.secretHash, value: stored.loggerId };
      },
      precheck: (key, secret) => isUuidV4(key) && isUuidV4(secret),
      ttlMs: KEY_CHECK_TTL_MS,
      maxEntries: MAX_CACHED_CHECKS,
      topic: LOGS_KEYS_REVOKED_TOPIC,
      selectors: { logger: (loggerId) => loggerId },
    });
  }

  /** Number of bcrypt comparisons run (for tests). */
  get verifications(): number {
    return this.keys.verifications;
  }

  requireUser(request: FastifyRequest): string {
    return requireIdentity(request).user.id;
  }

  /** The README's decision procedure (access) for a logger-scoped request. */
  async authorize(request: FastifyRequest, loggerId: string): Promise<Access> {
    const { identity, apiKey } = ownerOrKeyCredentials(request);
    const owners = await this.loggers.owners(loggerId);
    if (!owners) throw LogsErrors.loggerNotFound();
    if (identity && owners.includes(identity.user.id)) return { loggerId, userId: identity.user.id };
    if (apiKey !== undefined) {
      const keyLogger = await this.keyLogger(request);
      if (keyLogger !== loggerId) throw LogsErrors.keyOfAnotherLogger();
      return { loggerId, userId: identity?.user.id ?? null };
    }
    throw LogsErrors.notAnOwner();
  }

  /** The logger of the request's key pair (for /v1/ingest/events), or 401. */
  async keyLogger(request: FastifyRequest): Promise<string> {
    const key = request.headers[API_KEY_HEADER];
    const secret = request.headers[API_SECRET_HEADER];
    if (typeof key !== 'string' || typeof secret !== 'string' || !isUuidV4(key)) throw LogsErrors.badKey();
    const hash = CredentialChecker.pairHash(key, secret);
    const cached = this.keys.cached(hash);
    if (cached !== undefined) {
      // Read every time: a deleted key fails at once even where a cached check remains.
      const stored = await this.loggers.findKey(key);
      if (stored?.loggerId === cached) return cached;
      this.keys.forgetKey(key);
      if (!stored) throw LogsErrors.badKey();
    }
    // Not cached: the check looks the key row up itself.
    const check = await this.keys.check(key, secret, hash);
    if (check.status !== 'ok') throw LogsErrors.badKey();
    return check.value;
  }

  forgetAll(): void {
    this.keys.forgetAll();
  }

  /** Keys were deleted (one, or all of a logger): forget here, then tell every instance. */
  async revoke(detail: { key: string } | { logger: string }): Promise<void> {
    await this.keys.revoke(detail);
  }

  close(): void {
    this.keys.close();
  }
}
