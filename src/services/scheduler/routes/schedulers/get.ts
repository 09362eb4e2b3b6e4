import type { ServiceApp } from '../../../../core/app.ts';
import { publicErrors, scheduler, schedulerParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { loadScheduler, schedulerObject } from './object.ts';
import { ANONYMOUS } from '../../../../core/openapi.ts';

export const getSchedulerSchema = {
  tags: ['schedulers'],
  operationId: 'getScheduler',
  security: ANONYMOUS,
  summary: 'Get a scheduler',
  params: schedulerParams,
  response: { 200: scheduler, ...publicErrors },
};

/** `GET /schedulers/:id`. */
export function registerGetScheduler(app: ServiceApp, deps: RouteDeps): void {
  app.get('/schedulers/:id', { schema: getSchedulerSchema }, async (request) =>
    schedulerObject(await loadScheduler(deps, request.params.id)),
  );
}
