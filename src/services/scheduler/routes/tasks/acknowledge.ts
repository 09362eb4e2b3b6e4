import { Type } from 'typebox';
import { Compile } from 'typebox/compile';
import type { ServiceApp } from '../../../../core/app.ts';
import { SchedulerErrors } from '../../errors.ts';
import { ackBody, ID_REGEX, leaseQuery, privateErrors, taskParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { leaseIdOf } from './common.ts';

const ackBodyCheck = Compile(ackBody);
const ackBodyCheckFn = (value: unknown) => ackBodyCheck.Check(value);

export const acknowledgeTaskSchema = {
  tags: ['tasks'],
  summary: 'Acknowledge an in-flight task or cancel a scheduled one (lease_id: only under that lease)',
  params: taskParams,
  querystring: leaseQuery,
  description: 'The optional body `{"lease_id": "…"}` is checked by the handler: DELETE usually comes without a body.',
  response: { 204: Type.Null(), ...privateErrors },
};

/** `DELETE /schedulers/:id/tasks/:task`: removes the task; with a `lease_id`, only under that lease. */
export function registerAcknowledgeTask(app: ServiceApp, { repository, events, requireKey, now }: RouteDeps): void {
  app.delete(
    '/schedulers/:id/tasks/:task',
    { onRequest: requireKey, schema: acknowledgeTaskSchema },
    async (request, reply) => {
      const body = request.body;
      if (body !== undefined && !ackBodyCheckFn(body)) throw SchedulerErrors.acknowledgeBodyInvalid();
      const leaseId = leaseIdOf(request);
      const { id, task } = request.params;
      if (!ID_REGEX.test(id)) throw SchedulerErrors.schedulerNotFound(id);
      const outcome = ID_REGEX.test(task)
        ? await repository.acknowledge(id, task, leaseId, now())
        : (await repository.exists(id))
          ? 'task_not_found'
          : 'not_found';
      if (outcome === 'not_found') throw SchedulerErrors.schedulerNotFound(id);
      if (outcome === 'task_not_found') throw SchedulerErrors.taskNotFound(task);
      if (outcome === 'lease_mismatch') throw SchedulerErrors.leaseMismatch();
      events.changed(id);
      return reply.code(204).send(null);
    },
  );
}
