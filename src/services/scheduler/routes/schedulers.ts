import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { conflict, notFound } from '../../../core/errors.ts';
import { newId } from '../../../core/ids.ts';
import type { SchedulerEvents } from '../events.ts';
import type { SchedulerRepository, SchedulerRow } from '../repository.ts';
import { createSchedulerBody, health, ID_REGEX, patchSchedulerBody, privateErrors, publicErrors, putSchedulerBody, scheduler, schedulerParams, searchQuery } from '../schemas.ts';
import { formatTime } from '../time.ts';

export interface RouteDeps {
  repository: SchedulerRepository;
  events: SchedulerEvents;
  /** onRequest hook of private routes: 401 before anything else is looked at. */
  requireKey: (request: FastifyRequest) => Promise<void>;
  now: () => number;
}

export function schedulerObject(row: SchedulerRow) {
  const total = Number(row.total);
  const inflight = Number(row.inflight);
  return {
    id: row.id,
    display_name: row.display_name,
    ready: true,
    scheduled: total - inflight,
    inflight,
    created_at: formatTime(Number(row.created_ms)),
    updated_at: formatTime(Number(row.updated_ms)),
  };
}

export const schedulerNotFound = (id: string) => notFound(`scheduler ${JSON.stringify(id)} not found`);

/** Schedulers CRUD and health (scheduler.md §5). */
export function registerSchedulerRoutes(app: ServiceApp, deps: RouteDeps): void {
  const { repository, events, requireKey, now } = deps;
  const tags = ['schedulers'];

  const load = async (id: string) => {
    const row = ID_REGEX.test(id) ? await repository.getScheduler(id, now()) : undefined;
    if (!row) throw schedulerNotFound(id);
    return row;
  };

  app.get(
    '/schedulers',
    {
      schema: {
        tags,
        summary: 'List schedulers in creation order',
        description: '`search` keeps schedulers whose display_name contains the text (case-insensitive); the legacy `q` does the same and also matches the id.',
        querystring: searchQuery,
        response: { 200: Type.Object({ schedulers: Type.Array(scheduler), total: Type.Integer() }), ...publicErrors },
      },
    },
    async (request) => {
      const search = request.query.search?.toLowerCase();
      const q = request.query.q?.toLowerCase();
      const rows = (await repository.listSchedulers(now())).filter(
        (row) => (!search || row.display_name.toLowerCase().includes(search)) && (!q || row.display_name.toLowerCase().includes(q) || row.id.toLowerCase().includes(q)),
      );
      return { schedulers: rows.map(schedulerObject), total: rows.length };
    },
  );

  app.post(
    '/schedulers',
    { onRequest: requireKey, schema: { tags, summary: 'Create a scheduler', body: createSchedulerBody, response: { 201: Type.Object({ scheduler }), ...privateErrors } } },
    async (request, reply) => {
      const { id = newId('sched'), display_name, description } = request.body;
      if (!(await repository.createScheduler(id, display_name, description ?? null, now()))) throw conflict(`scheduler ${JSON.stringify(id)} already exists`);
      return reply.code(201).send({ scheduler: schedulerObject(await load(id)) });
    },
  );

  app.get('/schedulers/:id', { schema: { tags, summary: 'Get a scheduler', params: schedulerParams, response: { 200: scheduler, ...publicErrors } } }, async (request) =>
    schedulerObject(await load(request.params.id)),
  );

  for (const method of ['put', 'patch'] as const) {
    const body = method === 'put' ? putSchedulerBody : patchSchedulerBody;
    app[method](
      '/schedulers/:id',
      {
        onRequest: requireKey,
        schema: {
          tags,
          summary: method === 'put' ? 'Replace a scheduler (display_name required)' : 'Change the given fields of a scheduler',
         
          params: schedulerParams,
          body,
          response: { 200: scheduler, ...privateErrors },
        },
      },
      async (request) => {
        const { id } = request.params;
        const change = request.body as { display_name?: string; description?: string };
        if (!ID_REGEX.test(id) || !(await repository.updateScheduler(id, change, method === 'patch', now()))) throw schedulerNotFound(id);
        return schedulerObject(await load(id));
      },
    );
  }

  app.delete(
    '/schedulers/:id',
    { onRequest: requireKey, schema: { tags, summary: 'Delete a scheduler and all its tasks', params: schedulerParams, response: { 204: Type.Null(), ...privateErrors } } },
    async (request, reply) => {
      const { id } = request.params;
      if (!ID_REGEX.test(id) || !(await repository.deleteScheduler(id))) throw schedulerNotFound(id);
      events.changed(id, { deleted: true });
      return reply.code(204).send(null);
    },
  );

  app.get('/schedulers/:id/health', { schema: { tags, summary: 'Scheduler health and counts', params: schedulerParams, response: { 200: health, ...publicErrors } } }, async (request) => {
    const row = await load(request.params.id);
    const s = schedulerObject(row);
    return { status: 'ok' as const, ready: true, scheduled: s.scheduled, inflight: s.inflight, scheduler_id: s.id };
  });
}

