import { Type } from 'typebox';
import type { ServiceApp } from '../../../../core/app.ts';
import { errorBody } from '../../../../core/schemas.ts';
import { newId } from '../../../../core/ids.ts';
import { SchedulerErrors } from '../../errors.ts';
import { createSchedulerBody, privateErrors, scheduler } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { loadScheduler, schedulerObject } from './object.ts';
import { SCHEDULER_KEY } from '../../../../core/openapi.ts';
import { identityOf } from '../../../../core/identity.ts';
import { storedDelivery } from '../../target.ts';

export const createSchedulerSchema = {
  tags: ['schedulers'],
  operationId: 'createScheduler',
  security: SCHEDULER_KEY,
  summary: 'Create a scheduler',
  description:
    'With `target`, the platform delivers due tasks itself (a lambda target needs a signed-in platform user beside the key; the webhook `secret` is write-only).',
  body: createSchedulerBody,
  response: { 201: Type.Object({ scheduler }), ...privateErrors, 503: errorBody },
};

/** `POST /schedulers`: 409 when the chosen id is taken. */
export function registerCreateScheduler(app: ServiceApp, deps: RouteDeps): void {
  const { repository, requireKey, now } = deps;
  app.post('/schedulers', { onRequest: requireKey, schema: createSchedulerSchema }, async (request, reply) => {
    const { id = newId('sched'), display_name, description } = request.body;
    const delivery = await storedDelivery(id, request.body, {
      sealing: deps.sealing,
      services: deps.services,
      identity: identityOf(request),
    });
    if (
      !(await repository.createScheduler(id, display_name, description ?? null, now(), {
        target: delivery.target ?? null,
        retry: delivery.retry ?? null,
      }))
    )
      throw SchedulerErrors.schedulerExists(id);
    if (delivery.target) deps.events.changed(id, { due: true, retarget: true });
    return reply.code(201).send({ scheduler: schedulerObject(await loadScheduler(deps, id)) });
  });
}
