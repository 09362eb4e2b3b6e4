import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';
import { assertMayManage } from '../../access.ts';
import { ApikeysErrors } from '../../errors.ts';
import {
  commonErrors,
  errorResponse,
  project as projectSchema,
  projectParams,
  updateProjectBody,
} from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { normalizedOrigins, projectView } from './common.ts';

export const updateProjectSchema = {
  tags: ['projects'],
  operationId: 'updateProject',
  security: SIGNED_IN,
  summary: 'Rename a project or set the origins allowed plain CORS; the gateway applies a change at once',
  params: projectParams,
  body: updateProjectBody,
  response: { 200: projectSchema, ...commonErrors, 403: errorResponse, 404: errorResponse },
};

/**
 * `PATCH /v0/projects/{id}` (README: Projects): answers the project as it now is, published on
 * `projects.changed` so every gateway drops its cached CORS answers. Bad origins change nothing.
 */
export function registerUpdateProject(app: ServiceApp, deps: RouteDeps): void {
  const { repository, events } = deps;
  app.patch('/v0/projects/:id', { schema: updateProjectSchema }, async (request) => {
    const identity = requireIdentity(request);
    await assertMayManage(identity, repository);
    const changes = { name: request.body.name, allowed_origins: normalizedOrigins(request.body.allowed_origins) };
    const project = await repository.updateProject(identity.user.id, request.params.id, changes);
    if (!project) throw ApikeysErrors.projectNotFound(request.params.id);
    await events.projectChanged({ id: project.id, slug: project.slug, op: 'updated' });
    return projectView(deps, project);
  });
}
