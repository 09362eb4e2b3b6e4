// What the scheduler page's Target form sends: a PATCH with `target` and `retry` only when they
// change (src/services/scheduler/README.md, Delivery). Pure functions without the DOM, so they are
// tested on their own (test/services/console/scheduler-change.test.ts).
import type { Scheduler, SchedulerChange } from '@stratus/client';
import { DraftError } from './lambda-change.ts';

export type TargetKind = 'none' | 'lambda' | 'webhook';

/** The Target form as text. The secret is typed only: the platform never answers it. */
export interface DeliveryDraft {
  kind: TargetKind;
  lambdaId: string;
  url: string;
  secret: string;
  maxAttempts: string;
  base: string;
  factor: string;
  cap: string;
}

type Target = NonNullable<Scheduler['target']>;

export function targetKind(target: Scheduler['target']): TargetKind {
  if (target === undefined) return 'none';
  return 'lambda_id' in target ? 'lambda' : 'webhook';
}

/** The form for a scheduler as stored; the retry fields are empty while it has no policy shown. */
export function deliveryDraftOf(scheduler: Scheduler): DeliveryDraft {
  const target: Target | undefined = scheduler.target;
  const retry = scheduler.retry;
  return {
    kind: targetKind(target),
    lambdaId: target && 'lambda_id' in target ? target.lambda_id : '',
    url: target && 'url' in target ? target.url : '',
    secret: '',
    maxAttempts: retry ? String(retry.max_attempts) : '',
    base: retry?.base ?? '',
    factor: retry ? String(retry.factor) : '',
    cap: retry?.cap ?? '',
  };
}

function targetChange(draft: DeliveryDraft, stored: Target | undefined): SchedulerChange['target'] {
  if (draft.kind === 'none') return stored === undefined ? undefined : null;
  if (draft.kind === 'lambda') {
    if (draft.lambdaId === '') throw new DraftError('Choose a lambda for the target.');
    return stored && 'lambda_id' in stored && stored.lambda_id === draft.lambdaId
      ? undefined
      : { lambda_id: draft.lambdaId };
  }
  const url = draft.url.trim();
  if (url === '') throw new DraftError('Type the webhook URL.');
  const sameUrl = stored !== undefined && 'url' in stored && stored.url === url;
  if (sameUrl && draft.secret === '') return undefined;
  // Write-only: a stored secret cannot be kept for another URL, so a new webhook needs it typed.
  if (draft.secret === '') throw new DraftError('Type the signing secret too: a webhook target is set with both.');
  return { url, secret: draft.secret };
}

function number(label: string, text: string): number {
  const value = Number(text);
  if (!Number.isFinite(value)) throw new DraftError(`${label} must be a number.`);
  return value;
}

function retryChange(draft: DeliveryDraft, stored: Scheduler['retry']): SchedulerChange['retry'] {
  const fields = [draft.maxAttempts, draft.base, draft.factor, draft.cap].map((t) => t.trim());
  const [maxAttempts, base, factor, cap] = fields as [string, string, string, string];
  if (stored === undefined && fields.every((t) => t === '')) return undefined;
  if (
    stored !== undefined &&
    maxAttempts === String(stored.max_attempts) &&
    base === stored.base &&
    factor === String(stored.factor) &&
    cap === stored.cap
  )
    return undefined;
  // All emptied: back to the platform's defaults.
  if (fields.every((t) => t === '')) return null;
  const retry: NonNullable<SchedulerChange['retry']> = {};
  if (maxAttempts !== '') retry.max_attempts = number('Max attempts', maxAttempts);
  if (base !== '') retry.base = base;
  if (factor !== '') retry.factor = number('Factor', factor);
  if (cap !== '') retry.cap = cap;
  return retry;
}

/**
 * The PATCH body for what changed in the form, or null when nothing did. A mistake the platform
 * would refuse anyway but the form can say better (no lambda chosen, a webhook without its secret)
 * is thrown as a DraftError before anything is sent; the platform checks the rest.
 */
export function deliveryChange(draft: DeliveryDraft, scheduler: Scheduler): SchedulerChange | null {
  const change: SchedulerChange = {};
  const target = targetChange(draft, scheduler.target);
  if (target !== undefined) change.target = target;
  const retry = retryChange(draft, scheduler.retry);
  if (retry !== undefined) change.retry = retry;
  return Object.keys(change).length > 0 ? change : null;
}

/** The retry policy in words, or that the platform's defaults apply. */
export function describeRetry(retry: Scheduler['retry']): string {
  if (!retry) return 'platform defaults';
  const attempts = `${retry.max_attempts} ${retry.max_attempts === 1 ? 'attempt' : 'attempts'}`;
  return `${attempts}; waits ${retry.base}, × ${retry.factor} per attempt, at most ${retry.cap}`;
}
