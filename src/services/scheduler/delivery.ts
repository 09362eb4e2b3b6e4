import { createHmac } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { request, type Dispatcher } from 'undici';
import type { EgressPolicy } from '../../core/egress.ts';
import type { SealingKey } from '../../core/sealing.ts';
import { UnsealError } from '../../core/sealing.ts';
import type { TaskTrigger } from '../../core/trigger.ts';
import type { PlatformMetrics } from '../../metrics/index.ts';
import type { ServiceCalls } from '../context.ts';
import type { SchedulerEvents } from './events.ts';
import type { DeliveryClaim, SchedulerRepository } from './repository.ts';
import {
  backoffMs,
  backoffOf,
  parseStoredTarget,
  retryOf,
  webhookSecretAad,
  type Backoff,
  type StoredTarget,
} from './target.ts';

/** The signature header of webhook deliveries (README: Webhook signatures). */
export const SIGNATURE_HEADER = 'stratus-signature';
/** A webhook answer's body is read up to this much, then discarded. */
const WEBHOOK_BODY_CAP = 64 * 1024;
/** The longest a last error is kept. */
const MAX_ERROR_LENGTH = 1000;
/** Schedulers with targets are read again this often, besides the notifications (a lost one, a new instance). */
const REFRESH_MS = 5_000;
/** On close, in-flight deliveries get this long to finish; the rest are left to their leases. */
const CLOSE_GRACE_MS = 2_000;

export interface DeliveryOptions {
  repository: SchedulerRepository;
  events: SchedulerEvents;
  logger: FastifyBaseLogger;
  now: () => number;
  sealing: SealingKey;
  /** Absent when the scheduler is built alone: lambda targets fail with a clear error then. */
  services: ServiceCalls | undefined;
  policy: EgressPolicy;
  dispatcher: Dispatcher;
  /** Deliveries at once per scheduler in this instance. */
  concurrency: number;
  /** The lease a delivery holds: longer than any delivery may take. */
  leaseMs: number;
  /** The longest one lambda delivery or one webhook request may take (bounded below the lease). */
  lambdaTimeoutMs: number;
  webhookTimeoutMs: number;
  /** The largest lambda answer read (it is discarded). */
  lambdaMaxBodyBytes: number;
  /** Counts each delivery's outcome (README.md: Metrics); absent when built alone. */
  metrics?: Pick<PlatformMetrics, 'delivery'>;
}

/** The signature of a webhook body: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`. */
export function webhookSignature(secret: string, unixSeconds: number, body: string): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.${body}`, 'utf8').digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

const clip = (text: string) => (text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH - 1)}…` : text);

/**
 * The platform's delivery of due tasks to their scheduler's target (README: Delivery). Each
 * instance runs one engine; for every scheduler with a target it keeps up to `concurrency` workers
 * that claim due tasks with the same atomic claim as a reserve (so no task is delivered twice at
 * once, across instances too), deliver them, then acknowledge, retry later or move them to the
 * dead list, each fenced by the claim's lease id.
 */
export class DeliveryEngine {
  private readonly runners = new Map<string, SchedulerRunner>();
  private refreshTimer: NodeJS.Timeout | undefined;
  private refreshing: Promise<void> | undefined;
  private refreshAgain = false;
  private unlisten: (() => void) | undefined;
  closed = false;

  constructor(readonly options: DeliveryOptions) {}

  start(): void {
    this.unlisten = this.options.events.listenAll((schedulerId, change) => {
      const runner = this.runners.get(schedulerId);
      if (change.deleted && runner) {
        runner.stop();
        this.runners.delete(schedulerId);
        return;
      }
      if (change.retarget) this.refresh();
      else if (runner && change.due) runner.wake();
    });
    this.refresh();
  }

  /** Reads the schedulers with targets again (coalesced); the timer makes it periodic. */
  refresh(): void {
    if (this.closed) return;
    if (this.refreshing) {
      this.refreshAgain = true;
      return;
    }
    clearTimeout(this.refreshTimer);
    this.refreshing = this.load()
      .catch((err: unknown) => this.options.logger.warn({ err }, 'scheduler delivery: could not read the targets'))
      .finally(() => {
        this.refreshing = undefined;
        if (this.closed) return;
        if (this.refreshAgain) {
          this.refreshAgain = false;
          this.refresh();
        } else this.refreshTimer = setTimeout(() => this.refresh(), REFRESH_MS);
      });
  }

  private async load(): Promise<void> {
    const targeted = await this.options.repository.targetedSchedulers();
    if (this.closed) return;
    const seen = new Set<string>();
    for (const row of targeted) {
      seen.add(row.id);
      const runner = this.runners.get(row.id);
      if (runner) runner.update(row.target, row.retry);
      else {
        const created = new SchedulerRunner(this, row.id, row.target, row.retry);
        this.runners.set(row.id, created);
        created.wake();
      }
    }
    for (const [id, runner] of this.runners)
      if (!seen.has(id)) {
        runner.stop();
        this.runners.delete(id);
      }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unlisten?.();
    clearTimeout(this.refreshTimer);
    await this.refreshing;
    const runners = [...this.runners.values()];
    this.runners.clear();
    for (const runner of runners) runner.stop();
    const settled = Promise.all(runners.map((r) => r.idle()));
    let timer: NodeJS.Timeout | undefined;
    const late = await Promise.race([
      settled.then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), CLOSE_GRACE_MS))),
    ]);
    clearTimeout(timer);
    if (late) {
      // Their tasks stay leased and are redelivered once the lease runs out (at-least-once).
      for (const runner of runners) runner.abort();
      await settled;
    }
  }
}

/** The workers of one scheduler in this instance. */
class SchedulerRunner {
  private target!: StoredTarget;
  private backoff!: Backoff;
  private targetText = '';
  private retryText: string | null = null;
  private running = 0;
  /** Counts wake-ups, so a worker that found nothing knows whether one came meanwhile. */
  private wakes = 0;
  private wanted = true;
  private stopped = false;
  private aborted = false;
  private timer: NodeJS.Timeout | undefined;
  private armSeq = 0;
  private readonly works = new Set<Promise<void>>();
  private readonly controllers = new Set<AbortController>();

  constructor(
    private readonly engine: DeliveryEngine,
    readonly id: string,
    target: string,
    retry: string | null,
  ) {
    this.update(target, retry);
  }

  update(target: string, retry: string | null): void {
    if (target === this.targetText && retry === this.retryText) return;
    try {
      this.target = parseStoredTarget(target);
      this.backoff = backoffOf(retryOf(retry));
      this.targetText = target;
      this.retryText = retry;
    } catch (err) {
      this.engine.options.logger.warn({ err, scheduler: this.id }, 'scheduler delivery: unreadable target');
    }
    this.wake();
  }

  wake(): void {
    this.wakes++;
    this.wanted = true;
    this.pump();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  abort(): void {
    this.aborted = true;
    for (const controller of this.controllers) controller.abort();
  }

  async idle(): Promise<void> {
    while (this.works.size > 0) await Promise.allSettled([...this.works]);
  }

  private pump(): void {
    const { concurrency, logger } = this.engine.options;
    while (!this.stopped && this.wanted && this.running < concurrency) {
      this.running++;
      const work: Promise<void> = this.work()
        .catch((err: unknown) => logger.warn({ err, scheduler: this.id }, 'scheduler delivery failed'))
        .finally(() => {
          this.running--;
          this.works.delete(work);
        });
      this.works.add(work);
    }
  }

  private async work(): Promise<void> {
    const { repository, events, now, leaseMs } = this.engine.options;
    while (!this.stopped) {
      const seen = this.wakes;
      let claim: DeliveryClaim | undefined;
      try {
        claim = await repository.claimForDelivery(this.id, now(), leaseMs);
      } catch (error) {
        // The database is away: try again in a while rather than spin.
        this.wanted = false;
        clearTimeout(this.timer);
        if (!this.stopped) this.timer = setTimeout(() => this.wake(), 1_000);
        throw error;
      }
      if (!claim) {
        if (this.wakes !== seen) continue;
        this.wanted = false;
        await this.arm();
        return;
      }
      events.changed(this.id);
      await this.deliver(claim);
    }
  }

  /** One timer per scheduler: at its next due time or lease expiry. */
  private async arm(): Promise<void> {
    const { repository, now } = this.engine.options;
    const seq = ++this.armSeq;
    const next = await repository.nextDue(this.id, now());
    if (seq !== this.armSeq || this.stopped) return;
    clearTimeout(this.timer);
    if (next === undefined) return;
    this.timer = setTimeout(() => this.wake(), Math.min(Math.max(0, Number(next) - now()) + 1, 2_147_000_000));
  }

  private async deliver(claim: DeliveryClaim): Promise<void> {
    const { repository, events, now, leaseMs } = this.engine.options;
    const target = this.target;
    const backoff = this.backoff;
    const controller = new AbortController();
    this.controllers.add(controller);
    // A delivery ends before its lease does, so no other worker can take the task while it runs.
    const limit = Math.max(
      100,
      Math.min(
        leaseMs - 1_000,
        target.kind === 'lambda' ? this.engine.options.lambdaTimeoutMs : this.engine.options.webhookTimeoutMs,
      ),
    );
    const timer = setTimeout(() => controller.abort(new Error(`no answer within ${limit} ms`)), limit);
    let error: string | null;
    try {
      error =
        target.kind === 'lambda'
          ? await this.toLambda(target, claim, controller.signal)
          : await this.toWebhook(target, claim, controller.signal);
    } catch (caught) {
      error = describe(caught, controller.signal);
    } finally {
      clearTimeout(timer);
      this.controllers.delete(controller);
    }
    // Cut short by shutdown: the lease runs out and another worker delivers it again.
    if (this.aborted) return;
    const metrics = this.engine.options.metrics;
    if (error === null) {
      metrics?.delivery(target.kind, 'succeeded');
      await repository.deliveryDone(this.id, claim.id, claim.lease_id);
      events.changed(this.id);
      return;
    }
    error = clip(error);
    if (claim.attempts >= backoff.maxAttempts) {
      metrics?.delivery(target.kind, 'dead');
      await repository.deliveryDead(this.id, claim.id, claim.lease_id, error, now());
      events.changed(this.id);
    } else {
      metrics?.delivery(target.kind, 'failed');
      await repository.deliveryFailed(
        this.id,
        claim.id,
        claim.lease_id,
        now() + backoffMs(backoff, claim.attempts),
        error,
      );
      events.changed(this.id, { due: true });
    }
  }

  private trigger(claim: DeliveryClaim): TaskTrigger {
    return {
      type: 'task',
      scheduler_id: this.id,
      task_id: claim.id,
      attempt: claim.attempts,
      labels: JSON.parse(claim.labels) as string[],
    };
  }

  /** null when the lambda answered 2xx, else why not. */
  private async toLambda(
    target: Extract<StoredTarget, { kind: 'lambda' }>,
    claim: DeliveryClaim,
    signal: AbortSignal,
  ): Promise<string | null> {
    const { services, lambdaMaxBodyBytes } = this.engine.options;
    if (!services) return 'lambda delivery is unavailable here (the scheduler runs without the platform services)';
    const answer = await services.call('lambda', {
      method: 'POST',
      path: `/api/v0/run/${encodeURIComponent(target.lambda_id)}`,
      identity: { user: { id: target.owner } },
      trigger: this.trigger(claim),
      body: claim.payload,
      headers: { 'content-type': 'application/json' },
      signal,
      // The answer is discarded; a large one is still a success, so the cap is the lambda's own.
      maxBodyBytes: lambdaMaxBodyBytes + 64 * 1024,
    });
    if (answer.status >= 200 && answer.status < 300) return null;
    let detail = '';
    try {
      const parsed = JSON.parse(answer.body.toString('utf8')) as { error?: { code?: unknown; message?: unknown } };
      const { code, message } = parsed.error ?? {};
      if (typeof message === 'string') detail = `: ${typeof code === 'string' ? `${code}: ` : ''}${message}`;
    } catch {
      // Not the error envelope: the status says enough.
    }
    return `lambda answered ${answer.status}${detail}`;
  }

  /** null when the webhook answered 2xx, else why not. */
  private async toWebhook(
    target: Extract<StoredTarget, { kind: 'webhook' }>,
    claim: DeliveryClaim,
    signal: AbortSignal,
  ): Promise<string | null> {
    const { policy, dispatcher, sealing } = this.engine.options;
    let secret: string;
    try {
      secret = sealing.open(webhookSecretAad(this.id), target.secret);
    } catch (error) {
      if (error instanceof UnsealError && error.problem.kind === 'key_mismatch')
        return 'webhook: the secret was sealed with another key: every instance needs the same LAMBDA_SECRETS_KEY';
      return 'webhook: the secret cannot be decrypted';
    }
    const url = new URL(target.url);
    const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
    // A literal address never reaches the dispatcher's lookup: checked here (names are checked there too).
    await policy.resolve(url.hostname, port);
    const body = claim.payload;
    const trigger = this.trigger(claim);
    const response = await request(url, {
      method: 'POST',
      dispatcher,
      signal,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'Stratus-Scheduler',
        [SIGNATURE_HEADER]: webhookSignature(secret, Math.floor(Date.now() / 1000), body),
        'stratus-scheduler-id': trigger.scheduler_id,
        'stratus-task-id': trigger.task_id,
        'stratus-attempt': String(trigger.attempt),
      },
      body,
    });
    try {
      await response.body.dump({ limit: WEBHOOK_BODY_CAP });
    } catch {
      // The answer's body is not needed: its status decides.
    }
    if (response.statusCode >= 200 && response.statusCode < 300) return null;
    return `webhook answered ${response.statusCode}`;
  }
}

function describe(error: unknown, signal: AbortSignal): string {
  if (signal.aborted) {
    const reason: unknown = signal.reason;
    return `delivery timed out (${reason instanceof Error ? reason.message : 'aborted'})`;
  }
  if (error instanceof Error) {
    const prefix = error.name === 'EgressRefused' ? 'webhook: ' : '';
    const cause = (error as { cause?: unknown }).cause;
    const detail = cause instanceof Error && cause.message !== error.message ? ` (${cause.message})` : '';
    return `${prefix}${error.message}${detail}`;
  }
  return String(error);
}
