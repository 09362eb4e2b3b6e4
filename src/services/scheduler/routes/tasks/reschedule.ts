import type { ServiceApp } from '../../../../core/app.ts';
import { SchedulerErrors } from '../../errors.ts';
import { ID_REGEX, privateErrors, rescheduleBody, rescheduled, taskParams } from '../../schemas.ts';
import { dueTime, formatTime } from '../../time.ts';
import type { RouteDeps } from '../deps.ts';
import { SCHEDULER_KEY } from '../../../../core/openapi.ts';

export const rescheduleTaskSchema = {
  tags: ['tasks'],
  operationId: 'rescheduleTask',
  security: SCHEDULER_KEY,
  summary: 'Give a scheduled task a new due time (delay or future)',
  params: taskParams,
  body: rescheduleBody,
  response: { 200: rescheduled, ...privateErrors },
};

/** `POST /schedulers/:id/tasks/:task/reschedule`: 409 `task_in_flight` while the task is leased. */
export function registerRescheduleTask(app: ServiceApp, { repository, events, requireKey, now }: RouteDeps): void {
  app.post(
    '/schedulers/:id/tasks/:task/reschedule',
    { onRequest: requireKey, schema: rescheduleTaskSchema },
    async (request) => {
      const at = now();
      const due = dueTime(request.body, at);
      if (due === undefined) throw SchedulerErrors.noDueTime();
      const { id, task } = request.params;
      if (!ID_REGEX.test(id)) throw SchedulerErrors.schedulerNotFound(id);
      const outcome = ID_REGEX.test(task)
        ? await repository.reschedule(id, task, due, at)
        : (await repository.exists(id))
          ? 'task_not_found'
          : 'not_found';
      if (outcome === 'not_found') throw SchedulerErrors.schedulerNotFound(id);
      if (outcome === 'task_not_found') throw SchedulerErrors.taskNotFound(task);
      if (outcome === 'task_in_flight') throw SchedulerErrors.taskInFlight();
      events.changed(id, { due: true });
      return { id: task, future: formatTime(due) };
    },
  );
}
