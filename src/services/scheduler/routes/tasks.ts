import type { ServerResponse } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { Compile } from 'typebox/compile';
import type { ServiceApp } from '../../../core/app.ts';
import { HttpError, validationError } from '../../../core/errors.ts';
import { newId } from '../../../core/ids.ts';
import { openSse } from '../../../core/stream.ts';
import type { Claimed, ListedTask, Page, TaskFilter } from '../repository.ts';
import {
  ackBody,
  enqueueBody,
  enqueued,
  extendBody,
  extended,
  ID_REGEX,
  leaseQuery,
  listQuery,
  privateErrors,
  publicErrors,
  rescheduleBody,
  rescheduled,
  reservation,
  reserveBody,
  schedulerParams,
  snapshot,
  taskList,
  taskParams,
} from '../schemas.ts';
import { MAX_WORKTIME_MS, dueTime, formatTime, parseDuration } from '../time.ts';
import { schedulerNotFound, type RouteDeps } from './schedulers.ts';

const taskNotFound = (id: string) => new HttpError(404, 'task_not_found', `task ${JSON.stringify(id)} not found`);
const leaseMismatch = () => new HttpError(409, 'lease_mismatch', 'lease_id is not the current lease of this task');

/** The longest a reserve waits for a task to come due (scheduler.md §6.3). */
const MAX_WAIT_MS = 30_000;
/** Streams send at most 4 snapshots a second (§7). */
const SNAPSHOT_INTERVAL_MS = 250;

interface ListQuery {
  scheduled_page: number;
  scheduled_per_page: number;
  inflight_page: number;
  inflight_per_page: number;
  search?: string;
  label?: string[];
}

const ackBodyCheck = Compile(ackBody);
const ackBodyCheckFn = (value: unknown) => ackBodyCheck.Check(value);

const pageMeta = (total: number, page: Page) => ({ total, page: page.page, per_page: page.perPage, total_pages: Math.ceil(total / page.perPage) });
const labelsOf = (text: string) => JSON.parse(text) as string[];

/** Task endpoints and the snapshot stream (scheduler.md §6, §7). */
export function registerTaskRoutes(app: ServiceApp, deps: RouteDeps): void {
  const { repository, events, requireKey, now } = deps;
  const tags = ['tasks'];

  const requireScheduler = async (id: string) => {
    if (!ID_REGEX.test(id) || !(await repository.exists(id))) throw schedulerNotFound(id);
  };

  const listing = async (schedulerId: string, query: ListQuery) => {
    const filter: TaskFilter = { labels: query.label ?? [] };
    if (query.search !== undefined) filter.search = query.search;
    const sp = { page: query.scheduled_page, perPage: query.scheduled_per_page };
    const ip = { page: query.inflight_page, perPage: query.inflight_per_page };
    const pages = await repository.listTasks(schedulerId, filter, sp, ip, now());
    return {
      scheduled: pages.scheduled.map((t: ListedTask) => ({ id: t.id, future: formatTime(Number(t.due_ms)), labels: labelsOf(t.labels) })),
      inflight: pages.inflight.map((t: ListedTask) => ({ id: t.id, lease_expires_at: formatTime(Number(t.due_ms)), labels: labelsOf(t.labels) })),
      scheduled_meta: pageMeta(pages.scheduledTotal, sp),
      inflight_meta: pageMeta(pages.inflightTotal, ip),
    };
  };

  app.post(
    '/schedulers/:id/tasks',
    { onRequest: requireKey, schema: { tags, summary: 'Enqueue a task', params: schedulerParams, body: enqueueBody, response: { 202: enqueued, ...privateErrors } } },
    async (request, reply) => {
      const body = request.body;
      const at = now();
      const due = dueTime(body, at) ?? at;
      const id = body.id ?? newId('task');
      const labels = body.labels ?? [];
      const payload = JSON.stringify(body.payload === undefined ? null : body.payload);
      const schedulerId = request.params.id;
      if (!ID_REGEX.test(schedulerId)) throw schedulerNotFound(schedulerId);
      const outcome = await repository.enqueue(schedulerId, id, payload, JSON.stringify(labels), due);
      if (outcome === 'not_found') throw schedulerNotFound(schedulerId);
      if (outcome === 'exists') throw new HttpError(409, 'task_already_exists', `task ${JSON.stringify(id)} already exists`);
      events.changed(schedulerId, { due: true });
      return reply.code(202).send({ id, future: formatTime(due), labels });
    },
  );

  app.get(
    '/schedulers/:id/tasks',
    { schema: { tags, summary: 'List scheduled and in-flight tasks, paginated independently', params: schedulerParams, querystring: listQuery, response: { 200: taskList, ...publicErrors } } },
    async (request) => {
      await requireScheduler(request.params.id);
      return listing(request.params.id, request.query as ListQuery);
    },
  );

  app.get(
    '/schedulers/:id/tasks/stream',
    {
      schema: {
        tags,
        summary: 'Server-sent events: a `snapshot` event on connect and after every change (at most 4 per second)',
        params: schedulerParams,
        querystring: listQuery,
        produces: ['text/event-stream'],
        response: { 200: { description: 'text/event-stream of `event: snapshot` frames', content: { 'text/event-stream': { schema: snapshot } } }, ...publicErrors },
      },
    },
    async (request, reply) => {
      const schedulerId = request.params.id;
      const query = request.query as ListQuery;
      await requireScheduler(schedulerId);
      const build = async () => {
        const list = await listing(schedulerId, query);
        const counts = await repository.counts(schedulerId, now());
        return {
          scheduler_id: schedulerId,
          generated_at: formatTime(now()),
          ...list,
          health: { status: 'ok', ready: true, scheduled: counts.scheduled, inflight: counts.inflight, scheduler_id: schedulerId },
        };
      };
      const first = await build();
      reply.hijack();
      const writer = openSse(reply.raw, { headers: { Connection: 'keep-alive' } });
      let dirty = false;
      let sending = false;
      let lastSent = 0;
      let timer: NodeJS.Timeout | undefined;
      let expiryTimer: NodeJS.Timeout | undefined;

      const armExpiry = async () => {
        clearTimeout(expiryTimer);
        const next = await repository.nextExpiry(schedulerId, now());
        // Expiry needs no write, so no notification announces it: the stream sets its own timer.
        if (next !== undefined && !writer.closed) expiryTimer = setTimeout(() => requestSnapshot(), Math.min(next - now() + 5, 2_147_000_000));
      };
      const send = async () => {
        timer = undefined;
        if (writer.closed || sending) return;
        sending = true;
        dirty = false;
        try {
          if (!(await repository.exists(schedulerId))) return writer.end();
          const data = await build();
          lastSent = Date.now();
          await writer.send({ event: 'snapshot', data });
          await armExpiry();
        } catch {
          writer.end();
        } finally {
          sending = false;
          if (dirty && !writer.closed) requestSnapshot();
        }
      };
      // Coalesced: at most one snapshot per 250 ms, and a change always gets one after it.
      const requestSnapshot = () => {
        dirty = true;
        if (timer || sending || writer.closed) return;
        timer = setTimeout(() => void send(), Math.max(0, lastSent + SNAPSHOT_INTERVAL_MS - Date.now()));
      };
      const unlisten = events.listen(schedulerId, (change) => {
        if (change.deleted) writer.end();
        else requestSnapshot();
      });
      writer.signal.addEventListener('abort', () => {
        unlisten();
        clearTimeout(timer);
        clearTimeout(expiryTimer);
      });
      lastSent = Date.now();
      try {
        await writer.send({ event: 'snapshot', data: first });
        await armExpiry();
      } catch {
        writer.end();
      }
    },
  );

  app.post(
    '/schedulers/:id/tasks/reserve',
    {
      onRequest: requireKey,
      schema: {
        tags,
        summary: 'Lease the next due task, waiting up to min(worktime, 30s); 204 when none comes due',
       
        params: schedulerParams,
        body: reserveBody,
        response: { 200: reservation, 204: Type.Null(), ...privateErrors },
      },
    },
    async (request, reply) => {
      const worktime = parseDuration('worktime', request.body.worktime);
      if (worktime <= 0) throw validationError('worktime must be a positive duration');
      if (worktime > MAX_WORKTIME_MS) throw validationError('worktime is at most 24h');
      const schedulerId = request.params.id;
      await requireScheduler(schedulerId);
      const claimed = await reserveWaiting(reply.raw, schedulerId, worktime);
      if (!claimed) return reply.code(204).send(null);
      // The payload is stored as JSON text and goes out verbatim, without a parse/serialise round.
      const json = `{"id":${JSON.stringify(claimed.id)},"payload":${claimed.payload},"lease_expires_at":"${formatTime(Number(claimed.due_ms))}","labels":${claimed.labels},"lease_id":"${claimed.lease_id}"}`;
      return reply.type('application/json; charset=utf-8').send(json as never);
    },
  );

  /**
   * Claims at once if a task is due; otherwise waits for a change (from any instance, through
   * the notifier) or for the next due time or lease expiry (a timer), then tries again.
   */
  const reserveWaiting = async (response: ServerResponse, schedulerId: string, worktime: number): Promise<Claimed | undefined> => {
    const deadline = now() + Math.min(worktime, MAX_WAIT_MS);
    let poke: (() => void) | undefined;
    let woken = false;
    let deleted = false;
    let gone = false;
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
    try {
      for (;;) {
        woken = false;
        const claimed = await repository.claim(schedulerId, now(), worktime);
        if (claimed) {
          events.changed(schedulerId);
          return claimed;
        }
        if (deleted) throw schedulerNotFound(schedulerId);
        const at = now();
        if (at >= deadline || gone) return undefined;
        const next = await repository.nextDue(schedulerId, at);
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
        if (gone) return undefined;
        if (deleted && !(await repository.exists(schedulerId))) throw schedulerNotFound(schedulerId);
      }
    } finally {
      unlisten();
      response.off('close', onClose);
    }
  };

  const leaseIdOf = (request: FastifyRequest) => {
    const fromQuery = (request.query as { lease_id?: string }).lease_id;
    const fromBody = (request.body as { lease_id?: string } | undefined)?.lease_id;
    if (fromQuery !== undefined && fromBody !== undefined && fromQuery !== fromBody) throw validationError('lease_id differs between the query and the body');
    return fromQuery ?? fromBody;
  };

  app.delete(
    '/schedulers/:id/tasks/:task',
    {
      onRequest: requireKey,
      schema: {
        tags,
        summary: 'Acknowledge an in-flight task or cancel a scheduled one (lease_id: only under that lease)',
       
        params: taskParams,
        querystring: leaseQuery,
        description: 'The optional body `{"lease_id": "…"}` is checked by the handler: DELETE usually comes without a body.',
        response: { 204: Type.Null(), ...privateErrors },
      },
    },
    async (request, reply) => {
      const body = request.body;
      if (body !== undefined && !ackBodyCheckFn(body)) throw validationError('the body may only be {"lease_id": string}');
      const leaseId = leaseIdOf(request);
      const { id, task } = request.params;
      if (!ID_REGEX.test(id)) throw schedulerNotFound(id);
      const outcome = ID_REGEX.test(task) ? await repository.acknowledge(id, task, leaseId, now()) : (await repository.exists(id)) ? 'task_not_found' : 'not_found';
      if (outcome === 'not_found') throw schedulerNotFound(id);
      if (outcome === 'task_not_found') throw taskNotFound(task);
      if (outcome === 'lease_mismatch') throw leaseMismatch();
      events.changed(id);
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/schedulers/:id/tasks/:task/extend',
    {
      onRequest: requireKey,
      schema: { tags, summary: 'Extend a live lease: new expiry = current expiry + extension', params: taskParams, querystring: leaseQuery, body: extendBody, response: { 200: extended, ...privateErrors } },
    },
    async (request) => {
      const extension = parseDuration('extension', request.body.extension);
      if (extension <= 0) throw new HttpError(400, 'invalid_lease', 'extension must be positive');
      const leaseId = leaseIdOf(request);
      const { id, task } = request.params;
      if (!ID_REGEX.test(id)) throw schedulerNotFound(id);
      const outcome = ID_REGEX.test(task) ? await repository.extend(id, task, leaseId, extension, now()) : (await repository.exists(id)) ? 'task_not_found' : 'not_found';
      if (outcome === 'not_found') throw schedulerNotFound(id);
      if (outcome === 'task_not_found') throw taskNotFound(task);
      if (outcome === 'lease_mismatch') throw leaseMismatch();
      if (outcome === 'conflict') throw new HttpError(409, 'conflict', 'the task is not in flight (no live lease)');
      events.changed(id);
      return { lease_expires_at: formatTime(outcome.expires) };
    },
  );

  app.post(
    '/schedulers/:id/tasks/:task/reschedule',
    {
      onRequest: requireKey,
      schema: { tags, summary: 'Give a scheduled task a new due time (delay or future)', params: taskParams, body: rescheduleBody, response: { 200: rescheduled, ...privateErrors } },
    },
    async (request) => {
      const at = now();
      const due = dueTime(request.body, at);
      if (due === undefined) throw validationError('give delay or future');
      const { id, task } = request.params;
      if (!ID_REGEX.test(id)) throw schedulerNotFound(id);
      const outcome = ID_REGEX.test(task) ? await repository.reschedule(id, task, due, at) : (await repository.exists(id)) ? 'task_not_found' : 'not_found';
      if (outcome === 'not_found') throw schedulerNotFound(id);
      if (outcome === 'task_not_found') throw taskNotFound(task);
      if (outcome === 'task_in_flight') throw new HttpError(409, 'task_in_flight', 'task is currently leased');
      events.changed(id, { due: true });
      return { id: task, future: formatTime(due) };
    },
  );
}
