import { Type } from 'typebox';
import type { ServiceApp } from '../../../../core/app.ts';
import { publicErrors, scheduler, searchQuery } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { schedulerObject } from './object.ts';
import { ANONYMOUS } from '../../../../core/openapi.ts';

export const listSchedulersSchema = {
  tags: ['schedulers'],
  operationId: 'listSchedulers',
  security: ANONYMOUS,
  summary: 'List schedulers in creation order',
  description:
    '`search` keeps schedulers whose display_name contains the text (case-insensitive); the legacy `q` does the same and also matches the id.',
  querystring: searchQuery,
  response: { 200: Type.Object({ schedulers: Type.Array(scheduler), total: Type.Integer() }), ...publicErrors },
};

/** `GET /schedulers`. */
export function registerListSchedulers(app: ServiceApp, { repository, now }: RouteDeps): void {
  app.get('/schedulers', { schema: listSchedulersSchema }, async (request) => {
    const search = request.query.search?.toLowerCase();
    const q = request.query.q?.toLowerCase();
    const rows = (await repository.listSchedulers(now())).filter(
      (row) =>
        (!search || row.display_name.toLowerCase().includes(search)) &&
        (!q || row.display_name.toLowerCase().includes(q) || row.id.toLowerCase().includes(q)),
    );
    return { schedulers: rows.map(schedulerObject), total: rows.length };
  });
}
