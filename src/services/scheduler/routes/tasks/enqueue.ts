import type { ServiceApp } from '../../../../core/app.ts';
import { newId } from '../../../../core/ids.ts';
import { SchedulerErrors } from '../../errors.ts';
import { enqueueBody, enqueued, ID_REGEX, privateErrors, schedulerParams } from '../../schemas.ts';
import { dueTime, formatTime } from '../../time.ts';
import type { RouteDeps } from '../deps.ts';
import { SCHEDULER_KEY } from '../../../../core/openapi.ts';

export const enqueueTaskSchema = {
  tags: ['tasks'],
  operationId: 'enqueueTask',
  security: SCHEDULER_KEY,
  summary: 'Enqueue a task',
  params: schedulerParams,
  body: enqueueBody,
  response: { 202: enqueued, ...privateErrors },
};

/** `POST /schedulers/:id/tasks`: due now unless `delay` or `future` says otherwise. */
export function registerEnqueueTask(app: ServiceApp, { repository, events, requireKey, now }: RouteDeps): void {
  app.post('/schedulers/:id/tasks', { onRequest: requireKey, schema: enqueueTaskSchema }, async (request, reply) => {
    const body = request.body;
    const at = now();
    const due = dueTime(body, at) ?? at;
    const id = body.id ?? newId('task');
    const labels = body.labels ?? [];
    const payload = JSON.stringify(body.payload === undefined ? null : body.payload);
    const schedulerId = request.params.id;
    if (!ID_REGEX.test(schedulerId)) throw SchedulerErrors.schedulerNotFound(schedulerId);
    const outcome = await repository.enqueue(schedulerId, id, payload, JSON.stringify(labels), due);
    if (outcome === 'not_found') throw SchedulerErrors.schedulerNotFound(schedulerId);
    if (outcome === 'exists') throw SchedulerErrors.taskExists(id);
    events.changed(schedulerId, { due: true });
    return reply.code(202).send({ id, future: formatTime(due), labels });
  });
}
