/**
 * What started a lambda run that no HTTP client asked for (issue 23): a cron tick of the lambda's
 * schedule, or a scheduler's task delivered to it. The platform passes it to the lambda service
 * in this header on calls it makes itself (src/gateway/service-calls.ts); the gateway strips a
 * client-sent one on the public port, as it strips the identity header.
 */
export const TRIGGER_HEADER = 'x-stratus-trigger';

/** A cron tick: `scheduled_at` is the tick's instant (RFC 3339). */
export interface CronTrigger {
  type: 'cron';
  scheduled_at: string;
}

/** A scheduler's task delivered to the lambda; `attempt` counts from 1. */
export interface TaskTrigger {
  type: 'task';
  scheduler_id: string;
  task_id: string;
  attempt: number;
  labels: string[];
}

export type PlatformTrigger = CronTrigger | TaskTrigger;

/** The header's trigger, or null when it is absent or not one the platform makes. */
export function parseTrigger(value: string | string[] | undefined): PlatformTrigger | null {
  if (typeof value !== 'string' || value.length === 0 || value.length > 64 * 1024) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
  const t = parsed as Record<string, unknown>;
  if (t.type === 'cron' && typeof t.scheduled_at === 'string') return { type: 'cron', scheduled_at: t.scheduled_at };
  if (
    t.type === 'task' &&
    typeof t.scheduler_id === 'string' &&
    typeof t.task_id === 'string' &&
    typeof t.attempt === 'number' &&
    Number.isInteger(t.attempt) &&
    Array.isArray(t.labels) &&
    t.labels.every((label) => typeof label === 'string')
  )
    return {
      type: 'task',
      scheduler_id: t.scheduler_id,
      task_id: t.task_id,
      attempt: t.attempt,
      labels: t.labels as string[],
    };
  return null;
}
