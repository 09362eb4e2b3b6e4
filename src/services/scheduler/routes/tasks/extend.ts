import type { ServiceApp } from '../../../../core/app.ts';
import { SchedulerErrors } from '../../errors.ts';
import { extendBody, extended, leaseQuery, privateErrors, taskParams } from '../../schemas.ts';
import { formatTime, parseDuration } from '../../time.ts';
import type { RouteDeps } from '../deps.ts';
import { underLease } from './common.ts';
import { SCHEDULER_KEY } from '../../../../core/openapi.ts';

export const extendLeaseSchema = {
  tags: ['tasks'],
  operationId: 'extendLease',
  security: SCHEDULER_KEY,
  summary: 'Extend a live lease: new expiry = current expiry + extension',
  params: taskParams,
  querystring: leaseQuery,
  body: extendBody,
  response: { 200: extended, ...privateErrors },
};

/** `POST /schedulers/:id/tasks/:task/extend`: 409 `conflict` without a live lease, `lease_mismatch` under another. */
export function registerExtendLease(app: ServiceApp, deps: RouteDeps): void {
  const { repository, events, requireKey, now } = deps;
  app.post(
    '/schedulers/:id/tasks/:task/extend',
    { onRequest: requireKey, schema: extendLeaseSchema },
    async (request) => {
      const extension = parseDuration('extension', request.body.extension);
      if (extension <= 0) throw SchedulerErrors.extensionNotPositive();
      const outcome = await underLease(deps, request, (scheduler, task, leaseId) =>
        repository.extend(scheduler, task, leaseId, extension, now()),
      );
      if (outcome === 'conflict') throw SchedulerErrors.taskNotInFlight();
      events.changed(request.params.id);
      return { lease_expires_at: formatTime(outcome.expires) };
    },
  );
}
