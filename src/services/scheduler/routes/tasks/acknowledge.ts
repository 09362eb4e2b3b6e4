import { Type } from 'typebox';
import { Compile } from 'typebox/compile';
import type { ServiceApp } from '../../../../core/app.ts';
import { SchedulerErrors } from '../../errors.ts';
import { ackBody, leaseQuery, privateErrors, taskParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { underLease } from './common.ts';
import { SCHEDULER_KEY } from '../../../../core/openapi.ts';

const ackBodyCheck = Compile(ackBody);
const ackBodyCheckFn = (value: unknown) => ackBodyCheck.Check(value);

export const acknowledgeTaskSchema = {
  tags: ['tasks'],
  operationId: 'acknowledgeTask',
  security: SCHEDULER_KEY,
  summary: 'Acknowledge an in-flight task or cancel a scheduled one (lease_id: only under that lease)',
  params: taskParams,
  querystring: leaseQuery,
  description: 'The optional body `{"lease_id": "…"}` is checked by the handler: DELETE usually comes without a body.',
  response: { 204: Type.Null(), ...privateErrors },
};

/** `DELETE /schedulers/:id/tasks/:task`: removes the task; with a `lease_id`, only under that lease. */
export function registerAcknowledgeTask(app: ServiceApp, deps: RouteDeps): void {
  const { repository, events, requireKey, now } = deps;
  app.delete(
    '/schedulers/:id/tasks/:task',
    { onRequest: requireKey, schema: acknowledgeTaskSchema },
    async (request, reply) => {
      const body = request.body;
      if (body !== undefined && !ackBodyCheckFn(body)) throw SchedulerErrors.acknowledgeBodyInvalid();
      await underLease(deps, request, (scheduler, task, leaseId) =>
        repository.acknowledge(scheduler, task, leaseId, now()),
      );
      events.changed(request.params.id);
      return reply.code(204).send(null);
    },
  );
}
