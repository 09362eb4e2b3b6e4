import { Type } from 'typebox';
import type { ServiceApp } from '../../../../core/app.ts';
import { SchedulerErrors } from '../../errors.ts';
import { ID_REGEX, privateErrors, schedulerParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SCHEDULER_KEY } from '../../../../core/openapi.ts';

export const deleteSchedulerSchema = {
  tags: ['schedulers'],
  operationId: 'deleteScheduler',
  security: SCHEDULER_KEY,
  summary: 'Delete a scheduler and all its tasks',
  params: schedulerParams,
  response: { 204: Type.Null(), ...privateErrors },
};

/** `DELETE /schedulers/:id`: its waiting reserves end with 404 and its streams end. */
export function registerDeleteScheduler(app: ServiceApp, { repository, events, requireKey }: RouteDeps): void {
  app.delete('/schedulers/:id', { onRequest: requireKey, schema: deleteSchedulerSchema }, async (request, reply) => {
    const { id } = request.params;
    if (!ID_REGEX.test(id) || !(await repository.deleteScheduler(id))) throw SchedulerErrors.schedulerNotFound(id);
    events.changed(id, { deleted: true });
    return reply.code(204).send(null);
  });
}
