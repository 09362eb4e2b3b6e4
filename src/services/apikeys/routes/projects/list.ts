import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';
import { errorResponse, projectList } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { projectView } from './common.ts';

export const listProjectsSchema = {
  tags: ['projects'],
  operationId: 'listProjects',
  security: SIGNED_IN,
  summary: "List the caller's projects in creation order",
  response: { 200: projectList, 401: errorResponse },
};

/** `GET /v0/projects`: a bare array of the caller's projects. */
export function registerListProjects(app: ServiceApp, deps: RouteDeps): void {
  app.get('/v0/projects', { schema: listProjectsSchema }, async (request) => {
    const identity = requireIdentity(request);
    return (await deps.repository.listProjects(identity.user.id)).map((project) => projectView(deps, project));
  });
}
