import { createHash } from 'node:crypto';
import { verify } from '@node-rs/bcrypt';
import type { FastifyRequest } from 'fastify';
import { forbidden, notFound, unauthorized } from '../../core/errors.ts';
import { ownerOrKeyCredentials, requireIdentity } from '../../core/identity.ts';
import { isUuidV4 } from '../../core/ids.ts';
import type { Notifier } from '../../store/notifier/types.ts';
import type { LoggerRepository } from './loggers.ts';

/** Published when logger keys stop existing (`{"key":…}` or `{"logger":…}`): every instance forgets them. */
export const LOGS_KEYS_REVOKED_TOPIC = 'logs.keys.revoked';

const API_KEY_HEADER = 'api-key';
const API_SECRET_HEADER = 'api-secret';
/** A successful key check is trusted this long (the key row is still re-read on every request). */
const KEY_CHECK_TTL_MS = 60_000;
const MAX_CACHED_CHECKS = 10_000;
const BAD_KEY_MESSAGE = 'unknown API key or wrong secret';

interface CachedCheck {
  key: string;
  loggerId: string;
  expiresAt: number;
}

/** What a logger-scoped request was allowed as. */
export interface Access {
  loggerId: string;
  /** The caller's user id when it came with a usable identity. */
  userId: string | null;
}

/**
 * Who may touch a logger (logs.md §2), following docdb's access rules: owners by the gateway
 * identity, keys by `Api-Key` + `Api-Secret` compared with bcrypt. Successful checks are cached
 * under a SHA-256 of key and secret (never the secret); the key row is read on every request so a
 * deleted key fails at once on every instance, and revocations on the notifier clear the caches.
 */
export class LogsAccess {
  private readonly checks = new Map<string, CachedCheck>();
  private epoch = 0;
  private readonly unsubscribe: (() => void)[] = [];

  constructor(
    private readonly loggers: LoggerRepository,
    private readonly notifier: Notifier,
  ) {
    this.unsubscribe.push(
      notifier.subscribe(LOGS_KEYS_REVOKED_TOPIC, () => this.forgetAll()),
      notifier.onResync(() => this.forgetAll()),
    );
  }

  requireUser(request: FastifyRequest): string {
    return requireIdentity(request).user.id;
  }

  /** logs.md §2 decision procedure for a logger-scoped request. */
  async authorize(request: FastifyRequest, loggerId: string): Promise<Access> {
    const { identity, apiKey } = ownerOrKeyCredentials(request);
    const owners = await this.loggers.owners(loggerId);
    if (!owners) throw notFound('logger not found');
    if (identity && owners.includes(identity.user.id)) return { loggerId, userId: identity.user.id };
    if (apiKey !== undefined) {
      const keyLogger = await this.keyLogger(request);
      if (keyLogger !== loggerId) throw forbidden('this API key belongs to another logger');
      return { loggerId, userId: identity?.user.id ?? null };
    }
    throw forbidden('not an owner of this logger');
  }

  /** The logger of the request's key pair (for /v1/ingest/events), or 401. */
  async keyLogger(request: FastifyRequest): Promise<string> {
    const key = request.headers[API_KEY_HEADER];
    const secret = request.headers[API_SECRET_HEADER];
    if (typeof key !== 'string' || typeof secret !== 'string' || !isUuidV4(key)) throw unauthorized(BAD_KEY_MESSAGE);
    // Read every time: a deleted key fails at once even where a cached check remains.
    const stored = await this.loggers.findKey(key);
    if (!stored) throw unauthorized(BAD_KEY_MESSAGE);
    const hash = createHash('sha256').update(`${key}\0${secret}`).digest('base64');
    const cached = this.checks.get(hash);
    if (cached && cached.expiresAt > Date.now() && cached.loggerId === stored.loggerId) return stored.loggerId;
    const epoch = this.epoch;
    if (!isUuidV4(secret) || !(await verify(secret, stored.secretHash))) throw unauthorized(BAD_KEY_MESSAGE);
    if (epoch === this.epoch) {
      if (this.checks.size >= MAX_CACHED_CHECKS) this.checks.clear();
      this.checks.set(hash, { key, loggerId: stored.loggerId, expiresAt: Date.now() + KEY_CHECK_TTL_MS });
    }
    return stored.loggerId;
  }

  forgetAll(): void {
    this.epoch++;
    this.checks.clear();
  }

  /** Keys were deleted (one, or all of a logger): forget here, then tell every instance. */
  async revoke(detail: { key: string } | { logger: string }): Promise<void> {
    this.forgetAll();
    await this.notifier.publish(LOGS_KEYS_REVOKED_TOPIC, JSON.stringify(detail));
  }

  close(): void {
    for (const stop of this.unsubscribe.splice(0)) stop();
    this.forgetAll();
  }
}
