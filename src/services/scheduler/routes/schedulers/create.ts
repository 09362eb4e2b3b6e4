import { Type } from 'typebox';
import type { ServiceApp } from '../../../../core/app.ts';
import { newId } from '../../../../core/ids.ts';
import { SchedulerErrors } from '../../errors.ts';
import { createSchedulerBody, privateErrors, scheduler } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { loadScheduler, schedulerObject } from './object.ts';
import { SCHEDULER_KEY } from '../../../../core/openapi.ts';

export const createSchedulerSchema = {
  tags: ['schedulers'],
  operationId: 'createScheduler',
  security: SCHEDULER_KEY,
  summary: 'Create a scheduler',
  body: createSchedulerBody,
  response: { 201: Type.Object({ scheduler }), ...privateErrors },
};

/** `POST /schedulers`: 409 when the chosen id is taken. */
export function registerCreateScheduler(app: ServiceApp, deps: RouteDeps): void {
  const { repository, requireKey, now } = deps;
  app.post('/schedulers', { onRequest: requireKey, schema: createSchedulerSchema }, async (request, reply) => {
    const { id = newId('sched'), display_name, description } = request.body;
    if (!(await repository.createScheduler(id, display_name, description ?? null, now())))
      throw SchedulerErrors.schedulerExists(id);
    return reply.code(201).send({ scheduler: schedulerObject(await loadScheduler(deps, id)) });
  });
}
