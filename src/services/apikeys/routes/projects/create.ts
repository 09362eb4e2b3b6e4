import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';
import { assertMayManage } from '../../access.ts';
import { commonErrors, createProjectBody, errorResponse, project as projectSchema } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { insertProject, normalizedOrigins, projectView } from './common.ts';

export const createProjectSchema = {
  tags: ['projects'],
  operationId: 'createProject',
  security: SIGNED_IN,
  summary: 'Create a project; its host <slug>.<domain> routes at once',
  body: createProjectBody,
  response: { 201: projectSchema, ...commonErrors, 403: errorResponse, 409: errorResponse },
};

/** `POST /v0/projects` (README: Projects, Slugs): published on `projects.changed` once stored. */
export function registerCreateProject(app: ServiceApp, deps: RouteDeps): void {
  const { repository, events } = deps;
  app.post('/v0/projects', { schema: createProjectSchema }, async (request, reply) => {
    const identity = requireIdentity(request);
    await assertMayManage(identity, repository);
    const origins = normalizedOrigins(request.body.allowed_origins);
    const project = await insertProject(deps, identity.user.id, request.body.name, request.body.slug, origins);
    await events.projectChanged({ id: project.id, slug: project.slug, op: 'created' });
    return reply.code(201).send(projectView(deps, project));
  });
}
