import type { ServerResponse } from 'node:http';
import { Type } from 'typebox';
import type { ServiceApp } from '../../../../core/app.ts';
import { onDrain } from '../../../../core/drain.ts';
import { SchedulerErrors } from '../../errors.ts';
import type { Claimed } from '../../repository.ts';
import { ID_REGEX, privateErrors, reservation, reserveBody, schedulerParams } from '../../schemas.ts';
import { MAX_WORKTIME_MS, formatTime, parseDuration } from '../../time.ts';
import type { RouteDeps } from '../deps.ts';
import { SCHEDULER_KEY } from '../../../../core/openapi.ts';

/** The longest a reserve waits for a task to come due: it waits min(worktime, 30 s) (README: waking). */
const MAX_WAIT_MS = 30_000;

export const reserveTaskSchema = {
  tags: ['tasks'],
  operationId: 'reserveTask',
  security: SCHEDULER_KEY,
  summary: 'Lease the next due task, waiting up to min(worktime, 30s); 204 when none comes due',
  params: schedulerParams,
  body: reserveBody,
  response: { 200: reservation, 204: Type.Null(), ...privateErrors },
};

/** `POST /schedulers/:id/tasks/reserve`: the earliest due task under a new lease of `worktime`. */
export function registerReserveTask(app: ServiceApp, deps: RouteDeps): void {
  app.post(
    '/schedulers/:id/tasks/reserve',
    { onRequest: deps.requireKey, schema: reserveTaskSchema },
    async (request, reply) => {
      const worktime = parseDuration('worktime', request.body.worktime);
      if (worktime <= 0) throw SchedulerErrors.worktimeNotPositive();
      if (worktime > MAX_WORKTIME_MS) throw SchedulerErrors.worktimeTooLong();
      const schedulerId = request.params.id;
      if (!ID_REGEX.test(schedulerId)) throw SchedulerErrors.schedulerNotFound(schedulerId);
      const claimed = await reserveWaiting(deps, reply.raw, schedulerId, worktime);
      if (!claimed) return reply.code(204).send(null);
      // The payload is stored as JSON text and goes out verbatim, without a parse/serialise round.
      const json = `{"id":${JSON.stringify(claimed.id)},"payload":${claimed.payload},"lease_expires_at":"${formatTime(Number(claimed.due_ms))}","labels":${claimed.labels},"lease_id":"${claimed.lease_id}"}`;
      return reply.type('application/json; charset=utf-8').send(json as never);
    },
  );
}

/**
 * Claims at once if a task is due; otherwise waits for a change (from any instance, through
 * the notifier) or for the next due time or lease expiry (a timer), then tries again. A wait ends
 * without claiming when the client leaves or the instance starts draining (README: Reconnecting):
 * the drained reserve answers 204 and the worker asks again, on another instance. Whether the
 * scheduler exists is asked only when nothing was claimed: only an existing scheduler has tasks
 * (deleting one deletes its tasks with it), so a busy reserve costs one statement.
 */
async function reserveWaiting(
  { repository, events, now }: RouteDeps,
  response: ServerResponse,
  schedulerId: string,
  worktime: number,
): Promise<Claimed | undefined> {
  const deadline = now() + Math.min(worktime, MAX_WAIT_MS);
  let poke: (() => void) | undefined;
  let woken = false;
  let deleted = false;
  let gone = false;
  let draining = false;
  const wake = () => {
    woken = true;
    poke?.();
  };
  const onClose = () => {
    gone = true;
    wake();
  };
  // Subscribed before the first claim, so a change between claim and wait is not lost.
  const unlisten = events.listen(schedulerId, (change) => {
    if (change.deleted) deleted = true;
    if (change.due || change.deleted) wake();
  });
  // A client that goes away ends the wait; nothing is leased to it afterwards.
  response.once('close', onClose);
  const stopDrain = onDrain(response.req, () => {
    draining = true;
    wake();
  });
  try {
    for (let attempt = 0; ; attempt++) {
      woken = false;
      const claimed = await repository.claim(schedulerId, now(), worktime);
      if (claimed) {
        events.changed(schedulerId);
        return claimed;
      }
      if (deleted || (attempt === 0 && !(await repository.exists(schedulerId))))
        throw SchedulerErrors.schedulerNotFound(schedulerId);
      const at = now();
      if (at >= deadline || gone || draining) return undefined;
      const next = await repository.nextDue(schedulerId, at);
      if (gone || draining) return undefined;
      if (woken) continue;
      const until = Math.min(deadline, next ?? deadline) - now();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(0, until) + 1);
        poke = () => {
          clearTimeout(timer);
          resolve();
        };
        if (woken) poke();
      });
      poke = undefined;
      if (gone || draining) return undefined;
      if (deleted && !(await repository.exists(schedulerId))) throw SchedulerErrors.schedulerNotFound(schedulerId);
    }
  } finally {
    stopDrain();
    unlisten();
    response.off('close', onClose);
  }
}
