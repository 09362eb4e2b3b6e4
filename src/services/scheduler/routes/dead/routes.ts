import { Type } from 'typebox';
import type { ServiceApp } from '../../../../core/app.ts';
import { ANONYMOUS, SCHEDULER_KEY } from '../../../../core/openapi.ts';
import { SchedulerErrors } from '../../errors.ts';
import { deadList, deadQuery, deadRetried, ID_REGEX, privateErrors, publicErrors, taskParams } from '../../schemas.ts';
import { schedulerParams } from '../../schemas.ts';
import { formatTime } from '../../time.ts';
import type { RouteDeps } from '../deps.ts';
import { labelsOf, pageMeta, requireScheduler } from '../tasks/common.ts';

export const listDeadSchema = {
  tags: ['dead letters'],
  operationId: 'listDeadTasks',
  security: ANONYMOUS,
  summary: 'Tasks whose deliveries all failed, in the order they failed (no payloads)',
  params: schedulerParams,
  querystring: deadQuery,
  response: { 200: deadList, ...publicErrors },
};

export const retryDeadSchema = {
  tags: ['dead letters'],
  operationId: 'retryDeadTask',
  security: SCHEDULER_KEY,
  summary: 'Put a dead task back, due now with no attempts; 409 when a task of that id exists',
  params: taskParams,
  response: { 200: deadRetried, ...privateErrors },
};

export const deleteDeadSchema = {
  tags: ['dead letters'],
  operationId: 'deleteDeadTask',
  security: SCHEDULER_KEY,
  summary: 'Discard a dead task',
  params: taskParams,
  response: { 204: Type.Null(), ...privateErrors },
};

/** `GET /schedulers/:id/dead`, `POST …/dead/:task/retry`, `DELETE …/dead/:task` (README: Delivery). */
export function registerDeadRoutes(app: ServiceApp, deps: RouteDeps): void {
  const { repository, events, requireKey, now } = deps;
  app.get('/schedulers/:id/dead', { schema: listDeadSchema }, async (request) => {
    const { id } = request.params;
    await requireScheduler(deps, id);
    const query = request.query as { page: number; per_page: number };
    const page = { page: query.page, perPage: query.per_page };
    const { tasks, total } = await repository.listDead(id, page);
    return {
      dead: tasks.map((t) => ({
        id: t.id,
        labels: labelsOf(t.labels),
        attempts: Number(t.attempts),
        last_error: t.last_error,
        failed_at: formatTime(Number(t.failed_ms)),
      })),
      meta: pageMeta(total, page),
    };
  });

  app.post('/schedulers/:id/dead/:task/retry', { onRequest: requireKey, schema: retryDeadSchema }, async (request) => {
    const { id, task } = request.params;
    if (!ID_REGEX.test(id)) throw SchedulerErrors.schedulerNotFound(id);
    const at = now();
    const outcome = ID_REGEX.test(task)
      ? await repository.retryDead(id, task, at)
      : (await repository.exists(id))
        ? 'task_not_found'
        : 'not_found';
    if (outcome === 'not_found') throw SchedulerErrors.schedulerNotFound(id);
    if (outcome === 'task_not_found') throw SchedulerErrors.taskNotFound(task);
    if (outcome === 'exists') throw SchedulerErrors.deadTaskIdInUse(task);
    events.changed(id, { due: true });
    return { id: task, future: formatTime(at) };
  });

  app.delete(
    '/schedulers/:id/dead/:task',
    { onRequest: requireKey, schema: deleteDeadSchema },
    async (request, reply) => {
      const { id, task } = request.params;
      if (!ID_REGEX.test(id)) throw SchedulerErrors.schedulerNotFound(id);
      const outcome = ID_REGEX.test(task)
        ? await repository.deleteDead(id, task)
        : (await repository.exists(id))
          ? 'task_not_found'
          : 'not_found';
      if (outcome === 'not_found') throw SchedulerErrors.schedulerNotFound(id);
      if (outcome === 'task_not_found') throw SchedulerErrors.taskNotFound(task);
      return reply.code(204).send(null);
    },
  );
}
