import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';
import { assertMayManage } from '../../access.ts';
import { ApikeysErrors } from '../../errors.ts';
import { commonErrors, errorResponse, project as projectSchema, projectParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { projectView } from './common.ts';

export const deleteProjectSchema = {
  tags: ['projects'],
  operationId: 'deleteProject',
  security: SIGNED_IN,
  summary: 'Delete a project; its host stops routing and its slug is free at once',
  params: projectParams,
  response: { 200: projectSchema, ...commonErrors, 403: errorResponse, 404: errorResponse },
};

/** `DELETE /v0/projects/{id}` (README: Projects): answers the deleted project, published on `projects.changed`. */
export function registerDeleteProject(app: ServiceApp, deps: RouteDeps): void {
  const { repository, events } = deps;
  app.delete('/v0/projects/:id', { schema: deleteProjectSchema }, async (request) => {
    const identity = requireIdentity(request);
    await assertMayManage(identity, repository);
    const project = await repository.deleteProject(identity.user.id, request.params.id);
    if (!project) throw ApikeysErrors.projectNotFound(request.params.id);
    await events.projectChanged({ id: project.id, slug: project.slug, op: 'deleted' });
    return projectView(deps, project);
  });
}
