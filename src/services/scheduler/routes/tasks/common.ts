import type { FastifyRequest } from 'fastify';
import { SchedulerErrors } from '../../errors.ts';
import type { ListedTask, Page, TaskFilter } from '../../repository.ts';
import { ID_REGEX } from '../../schemas.ts';
import { formatTime } from '../../time.ts';
import type { RouteDeps } from '../deps.ts';

/** 404 unless the scheduler exists (an id outside the id character set names none). */
export async function requireScheduler({ repository }: RouteDeps, id: string): Promise<void> {
  if (!ID_REGEX.test(id) || !(await repository.exists(id))) throw SchedulerErrors.schedulerNotFound(id);
}

/** The task list query (`listQuery`) after validation filled in its defaults. */
export interface ListQuery {
  scheduled_page: number;
  scheduled_per_page: number;
  inflight_page: number;
  inflight_per_page: number;
  search?: string;
  label?: string[];
}

export const pageMeta = (total: number, page: Page) => ({
  total,
  page: page.page,
  per_page: page.perPage,
  total_pages: Math.ceil(total / page.perPage),
});
export const labelsOf = (text: string) => JSON.parse(text) as string[];

/** `attempt` and `last_error` of a task the platform has tried to deliver; nothing on the others (README: Delivery). */
const deliveryState = (t: ListedTask) =>
  Number(t.attempts) > 0 ? { attempt: Number(t.attempts), last_error: t.last_error ?? null } : {};

/** One page of scheduled and one of in-flight tasks, as the task list and the stream's snapshots show them. */
export async function listing({ repository, now }: RouteDeps, schedulerId: string, query: ListQuery) {
  const filter: TaskFilter = { labels: query.label ?? [] };
  if (query.search !== undefined) filter.search = query.search;
  const sp = { page: query.scheduled_page, perPage: query.scheduled_per_page };
  const ip = { page: query.inflight_page, perPage: query.inflight_per_page };
  const pages = await repository.listTasks(schedulerId, filter, sp, ip, now());
  return {
    scheduled: pages.scheduled.map((t: ListedTask) => ({
      id: t.id,
      future: formatTime(Number(t.due_ms)),
      labels: labelsOf(t.labels),
      ...deliveryState(t),
    })),
    inflight: pages.inflight.map((t: ListedTask) => ({
      id: t.id,
      lease_expires_at: formatTime(Number(t.due_ms)),
      labels: labelsOf(t.labels),
      ...deliveryState(t),
    })),
    scheduled_meta: pageMeta(pages.scheduledTotal, sp),
    inflight_meta: pageMeta(pages.inflightTotal, ip),
  };
}

/** The `lease_id` of an acknowledge or extend, from the query or the body (400 when they differ). */
export function leaseIdOf(request: FastifyRequest): string | undefined {
  const fromQuery = (request.query as { lease_id?: string }).lease_id;
  const fromBody = (request.body as { lease_id?: string } | undefined)?.lease_id;
  if (fromQuery !== undefined && fromBody !== undefined && fromQuery !== fromBody)
    throw SchedulerErrors.leaseIdDiffers();
  return fromQuery ?? fromBody;
}

/** What an acknowledge or extend answers when the scheduler, the task or its lease is not the one named. */
type LeaseMiss = 'not_found' | 'task_not_found' | 'lease_mismatch';

/**
 * An acknowledge or extend of the request's `:task` of scheduler `:id` under its `lease_id`
 * (`leaseIdOf`): 404 for a scheduler or task that is not there (an id outside the id character set
 * names none), 409 `lease_mismatch` under another lease; any other outcome of `operation` is the
 * caller's.
 */
export async function underLease<Outcome>(
  { repository }: RouteDeps,
  request: FastifyRequest,
  operation: (id: string, task: string, leaseId: string | undefined) => Promise<Outcome | LeaseMiss>,
): Promise<Exclude<Outcome, LeaseMiss>> {
  const leaseId = leaseIdOf(request);
  const { id, task } = request.params as { id: string; task: string };
  if (!ID_REGEX.test(id)) throw SchedulerErrors.schedulerNotFound(id);
  const outcome = ID_REGEX.test(task)
    ? await operation(id, task, leaseId)
    : (await repository.exists(id))
      ? 'task_not_found'
      : 'not_found';
  if (outcome === 'not_found') throw SchedulerErrors.schedulerNotFound(id);
  if (outcome === 'task_not_found') throw SchedulerErrors.taskNotFound(task);
  if (outcome === 'lease_mismatch') throw SchedulerErrors.leaseMismatch();
  return outcome as Exclude<Outcome, LeaseMiss>;
}
