import type { ServiceApp } from '../../../../core/app.ts';
import { SchedulerErrors } from '../../errors.ts';
import {
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

const updateSchema = (method: 'put' | 'patch') => ({
  tags: ['schedulers'],
  operationId: method === 'put' ? 'replaceScheduler' : 'updateScheduler',
  security: SCHEDULER_KEY,
  summary: method === 'put' ? 'Replace a scheduler (display_name required)' : 'Change the given fields of a scheduler',
  params: schedulerParams,
  body: method === 'put' ? putSchedulerBody : patchSchedulerBody,
  response: { 200: scheduler, ...privateErrors },
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
        const change = request.body as { display_name?: string; description?: string };
        if (!ID_REGEX.test(id) || !(await repository.updateScheduler(id, change, method === 'patch', now())))
          throw SchedulerErrors.schedulerNotFound(id);
        return schedulerObject(await loadScheduler(deps, id));
      },
    );
  }
}
