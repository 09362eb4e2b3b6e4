import type { ServiceApp } from '../../../../core/app.ts';
import { listQuery, publicErrors, schedulerParams, taskList } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { listing, requireScheduler, type ListQuery } from './common.ts';
import { ANONYMOUS } from '../../../../core/openapi.ts';

export const listTasksSchema = {
  tags: ['tasks'],
  operationId: 'listTasks',
  security: ANONYMOUS,
  summary: 'List scheduled and in-flight tasks, paginated independently',
  params: schedulerParams,
  querystring: listQuery,
  response: { 200: taskList, ...publicErrors },
};

/** `GET /schedulers/:id/tasks`. */
export function registerListTasks(app: ServiceApp, deps: RouteDeps): void {
  app.get('/schedulers/:id/tasks', { schema: listTasksSchema }, async (request) => {
    await requireScheduler(deps, request.params.id);
    return listing(deps, request.params.id, request.query as ListQuery);
  });
}
