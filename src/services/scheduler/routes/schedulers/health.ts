import type { ServiceApp } from '../../../../core/app.ts';
import { health, publicErrors, schedulerParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { loadScheduler, schedulerObject } from './object.ts';
import { ANONYMOUS } from '../../../../core/openapi.ts';

export const schedulerHealthSchema = {
  tags: ['schedulers'],
  operationId: 'getSchedulerHealth',
  security: ANONYMOUS,
  summary: 'Scheduler health and counts',
  params: schedulerParams,
  response: { 200: health, ...publicErrors },
};

/** `GET /schedulers/:id/health`. */
export function registerSchedulerHealth(app: ServiceApp, deps: RouteDeps): void {
  app.get('/schedulers/:id/health', { schema: schedulerHealthSchema }, async (request) => {
    const s = schedulerObject(await loadScheduler(deps, request.params.id));
    return { status: 'ok' as const, ready: true, scheduled: s.scheduled, inflight: s.inflight, scheduler_id: s.id };
  });
}
