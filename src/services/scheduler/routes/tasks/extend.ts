import type { ServiceApp } from '../../../../core/app.ts';
import { SchedulerErrors } from '../../errors.ts';
import { extendBody, extended, ID_REGEX, leaseQuery, privateErrors, taskParams } from '../../schemas.ts';
import { formatTime, parseDuration } from '../../time.ts';
import type { RouteDeps } from '../deps.ts';
import { leaseIdOf } from './common.ts';

export const extendLeaseSchema = {
  tags: ['tasks'],
  summary: 'Extend a live lease: new expiry = current expiry + extension',
  params: taskParams,
  querystring: leaseQuery,
  body: extendBody,
  response: { 200: extended, ...privateErrors },
};

/** `POST /schedulers/:id/tasks/:task/extend`: 409 `conflict` without a live lease, `lease_mismatch` under another. */
export function registerExtendLease(app: ServiceApp, { repository, events, requireKey, now }: RouteDeps): void {
  app.post(
    '/schedulers/:id/tasks/:task/extend',
    { onRequest: requireKey, schema: extendLeaseSchema },
    async (request) => {
      const extension = parseDuration('extension', request.body.extension);
      if (extension <= 0) throw SchedulerErrors.extensionNotPositive();
      const leaseId = leaseIdOf(request);
      const { id, task } = request.params;
      if (!ID_REGEX.test(id)) throw SchedulerErrors.schedulerNotFound(id);
      const outcome = ID_REGEX.test(task)
        ? await repository.extend(id, task, leaseId, extension, now())
        : (await repository.exists(id))
          ? 'task_not_found'
          : 'not_found';
      if (outcome === 'not_found') throw SchedulerErrors.schedulerNotFound(id);
      if (outcome === 'task_not_found') throw SchedulerErrors.taskNotFound(task);
      if (outcome === 'lease_mismatch') throw SchedulerErrors.leaseMismatch();
      if (outcome === 'conflict') throw SchedulerErrors.taskNotInFlight();
      events.changed(id);
      return { lease_expires_at: formatTime(outcome.expires) };
    },
  );
}
