import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { SchedulerErrors } from './errors.ts';
import type { SchedulerRepository } from './repository.ts';

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/**
 * The scheduler API keys (README: generated key). Only their SHA-256 digests are kept in memory, and every
 * check compares the presented key's digest with every key in constant time.
 */
export class SchedulerKeys {
  private constructor(private readonly digests: readonly Buffer[]) {}

  /**
   * SCHEDULER_API_KEYS when set; otherwise the key generated on the first start and kept in the
   * platform database (so every instance and every restart shares it), printed once when made.
   */
  static async load(
    configured: readonly string[],
    repository: SchedulerRepository,
    print: (line: string) => void,
  ): Promise<SchedulerKeys> {
    const keys = configured.map((k) => k.trim()).filter((k) => k.length > 0);
    if (keys.length > 0) return new SchedulerKeys(keys.map(digest));
    const { key, created } = await repository.generatedKey(`sk-${randomBytes(24).toString('base64url')}`);
    if (created)
      print(`scheduler: generated API key (shown once; set SCHEDULER_API_KEYS to choose your own): ${key}\n`);
    return new SchedulerKeys([digest(key)]);
  }

  /** Throws 401 unless the request carries a valid key in X-API-Key or Authorization: Bearer. */
  check(request: FastifyRequest): void {
    const presented = presentedKey(request);
    if (presented === undefined) throw SchedulerErrors.keyRequired();
    const hash = digest(presented);
    let ok = false;
    for (const known of this.digests) ok = timingSafeEqual(hash, known) || ok;
    if (!ok) throw SchedulerErrors.keyInvalid();
  }
}

function presentedKey(request: FastifyRequest): string | undefined {
  const header = request.headers['x-api-key'];
  const apiKey = Array.isArray(header) ? header[0] : header;
  if (apiKey) return apiKey;
  const authorization = request.headers.authorization;
  if (!authorization) return undefined;
  const match = /^bearer\s+(.+)$/i.exec(authorization.trim());
  return match?.[1]?.trim() || undefined;
}
