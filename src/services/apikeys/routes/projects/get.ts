import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';
import { ApikeysErrors } from '../../errors.ts';
import { commonErrors, errorResponse, project as projectSchema, projectParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { projectView } from './common.ts';

export const getProjectSchema = {
  tags: ['projects'],
  operationId: 'getProject',
  security: SIGNED_IN,
  summary: 'Get a project the caller owns',
  params: projectParams,
  response: { 200: projectSchema, ...commonErrors, 404: errorResponse },
};

/** `GET /v0/projects/{id}`: another user's project is 404, like a missing one. */
export function registerGetProject(app: ServiceApp, deps: RouteDeps): void {
  app.get('/v0/projects/:id', { schema: getProjectSchema }, async (request) => {
    const identity = requireIdentity(request);
    const project = await deps.repository.getProject(identity.user.id, request.params.id);
    if (!project) throw ApikeysErrors.projectNotFound(request.params.id);
    return projectView(deps, project);
  });
}
