import type { ServiceApp } from '../../../../core/app.ts';
import { errorBody } from '../../../../core/schemas.ts';
import { SchedulerErrors } from '../../errors.ts';
import {
  type DeliveryChange,
  ID_REGEX,
  patchSchedulerBody,
  privateErrors,
  putSchedulerBody,
  scheduler,
  schedulerParams,
} from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { loadScheduler, schedulerObject } from './object.ts';
import { SCHEDULER_KEY } from '../../../../core/openapi.ts';
import { identityOf } from '../../../../core/identity.ts';
import { storedDelivery } from '../../target.ts';

const updateSchema = (method: 'put' | 'patch') => ({
  tags: ['schedulers'],
  operationId: method === 'put' ? 'replaceScheduler' : 'updateScheduler',
  security: SCHEDULER_KEY,
  summary: method === 'put' ? 'Replace a scheduler (display_name required)' : 'Change the given fields of a scheduler',
  params: schedulerParams,
  body: method === 'put' ? putSchedulerBody : patchSchedulerBody,
  response: { 200: scheduler, ...privateErrors, 503: errorBody },
});

export const updateSchedulerSchemas = { put: updateSchema('put'), patch: updateSchema('patch') };

/** `PUT /schedulers/:id` replaces (description too); `PATCH` changes only the fields given. */
export function registerUpdateScheduler(app: ServiceApp, deps: RouteDeps): void {
  const { repository, requireKey, now } = deps;
  for (const method of ['put', 'patch'] as const) {
    app[method](
      '/schedulers/:id',
      { onRequest: requireKey, schema: updateSchedulerSchemas[method] },
      async (request) => {
        const { id } = request.params;
        const body = request.body as DeliveryChange & { display_name?: string; description?: string };
        // An unknown scheduler is a 404 before a target is checked (that may call the lambda service).
        if (!ID_REGEX.test(id) || !(await repository.exists(id))) throw SchedulerErrors.schedulerNotFound(id);
        const delivery = await storedDelivery(id, body, {
          sealing: deps.sealing,
          services: deps.services,
          identity: identityOf(request),
        });
        const change = { display_name: body.display_name, description: body.description, ...delivery };
        // Deleted meanwhile: still a 404.
        if (!(await repository.updateScheduler(id, change, method === 'patch', now())))
          throw SchedulerErrors.schedulerNotFound(id);
        if (delivery.target !== undefined || delivery.retry !== undefined)
          deps.events.changed(id, { due: true, retarget: true });
        return schedulerObject(await loadScheduler(deps, id));
      },
    );
  }
}
