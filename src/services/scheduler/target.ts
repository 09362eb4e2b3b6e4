import type { ServiceCalls } from '../context.ts';
import type { Identity } from '../../core/identity.ts';
import type { SealingKey } from '../../core/sealing.ts';
import { SchedulerErrors } from './errors.ts';
import type { DeliveryChange } from './schemas.ts';
import { MAX_WORKTIME_MS, parseDuration } from './time.ts';

/** A target as stored (README: Delivery): the webhook secret sealed, the lambda's owner recorded. */
export type StoredTarget =
  { kind: 'lambda'; lambda_id: string; owner: string } | { kind: 'webhook'; url: string; secret: string };

/** The retry policy as given and shown: durations in the scheduler's Go syntax. */
export interface RetryPolicy {
  max_attempts: number;
  base: string;
  factor: number;
  cap: string;
}

export const DEFAULT_RETRY: RetryPolicy = { max_attempts: 5, base: '5s', factor: 2, cap: '15m' };

/** A retry policy in milliseconds, for the delivery engine. */
export interface Backoff {
  maxAttempts: number;
  baseMs: number;
  factor: number;
  capMs: number;
}

/** The webhook secret's additional authenticated data: sealed for this scheduler's webhook only. */
export const webhookSecretAad = (schedulerId: string) => `scheduler-webhook:${schedulerId}`;

export function parseStoredTarget(text: string): StoredTarget {
  return JSON.parse(text) as StoredTarget;
}

export function retryOf(stored: string | null): RetryPolicy {
  return stored === null ? DEFAULT_RETRY : { ...DEFAULT_RETRY, ...(JSON.parse(stored) as Partial<RetryPolicy>) };
}

export function backoffOf(policy: RetryPolicy): Backoff {
  return {
    maxAttempts: policy.max_attempts,
    baseMs: parseDuration('retry.base', policy.base),
    factor: policy.factor,
    capMs: parseDuration('retry.cap', policy.cap),
  };
}

/** The wait before delivery `attempts + 1`: min(cap, base × factor^(attempts − 1)). */
export function backoffMs(backoff: Backoff, attempts: number): number {
  return Math.min(backoff.capMs, backoff.baseMs * backoff.factor ** Math.max(0, attempts - 1));
}

/** The target of the scheduler object: never the secret, only that one is set. */
export function targetObject(stored: string): { lambda_id: string } | { url: string; secret_set: true } {
  const target = parseStoredTarget(stored);
  return target.kind === 'lambda' ? { lambda_id: target.lambda_id } : { url: target.url, secret_set: true };
}

/** The retry policy of a body as stored (null: the defaults); 400 when a field is out of range. */
function storedRetry(retry: NonNullable<DeliveryChange['retry']>): string {
  const policy: RetryPolicy = { ...DEFAULT_RETRY, ...retry };
  const base = parseDuration('retry.base', policy.base);
  const cap = parseDuration('retry.cap', policy.cap);
  if (base <= 0) throw SchedulerErrors.retryInvalid('base', 'must be a positive duration');
  if (cap > MAX_WORKTIME_MS) throw SchedulerErrors.retryInvalid('cap', 'is at most 24h');
  if (cap < base) throw SchedulerErrors.retryInvalid('cap', 'must be at least retry.base');
  return JSON.stringify(policy);
}

function checkWebhookUrl(text: string): void {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw SchedulerErrors.targetUrlInvalid('not a URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw SchedulerErrors.targetUrlInvalid('must be an http or https URL');
  // Credentials in a URL end up in logs and lists; the secret is the way to authenticate.
  if (url.username !== '' || url.password !== '') throw SchedulerErrors.targetUrlInvalid('must not carry credentials');
  if (url.hash !== '') throw SchedulerErrors.targetUrlInvalid('must not have a fragment');
}

export interface DeliveryContext {
  sealing: SealingKey;
  /** Absent when the scheduler is built alone: lambda targets cannot be delivered then. */
  services: ServiceCalls | undefined;
  identity: Identity | null;
}

/**
 * The stored form of a body's `target` and `retry` (undefined: unchanged). A lambda target is
 * checked as the calling platform user (who becomes its owner: deliveries run as them); a webhook
 * secret is sealed for this scheduler. Every check runs before anything is written.
 */
export async function storedDelivery(
  schedulerId: string,
  change: DeliveryChange,
  context: DeliveryContext,
): Promise<{ target?: string | null; retry?: string | null }> {
  const out: { target?: string | null; retry?: string | null } = {};
  if (change.retry !== undefined) out.retry = change.retry === null ? null : storedRetry(change.retry);
  const target = change.target;
  if (target === undefined) return out;
  if (target === null) {
    out.target = null;
  } else if (target.lambda_id !== undefined) {
    if (target.url !== undefined || target.secret !== undefined) throw SchedulerErrors.targetKind();
    if (!context.services) throw SchedulerErrors.targetLambdaUnavailable();
    const owner = context.identity?.user.id;
    if (owner === undefined) throw SchedulerErrors.targetNeedsUser();
    let status: number;
    try {
      const answer = await context.services.call('lambda', {
        method: 'GET',
        path: `/api/v0/lambdas/${encodeURIComponent(target.lambda_id)}`,
        identity: { user: { id: owner } },
        maxBodyBytes: 1024 * 1024,
      });
      status = answer.status;
    } catch {
      throw SchedulerErrors.targetLambdaCheckFailed();
    }
    if (status === 404 || status === 403 || status === 400)
      throw SchedulerErrors.targetLambdaNotRunnable(target.lambda_id);
    if (status !== 200) throw SchedulerErrors.targetLambdaCheckFailed();
    const stored: StoredTarget = { kind: 'lambda', lambda_id: target.lambda_id, owner };
    out.target = JSON.stringify(stored);
  } else {
    if (target.url === undefined || target.secret === undefined) throw SchedulerErrors.targetKind();
    checkWebhookUrl(target.url);
    const stored: StoredTarget = {
      kind: 'webhook',
      url: target.url,
      secret: context.sealing.seal(webhookSecretAad(schedulerId), target.secret),
    };
    out.target = JSON.stringify(stored);
  }
  return out;
}
