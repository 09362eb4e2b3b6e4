import type { ServiceApp } from '../../../core/app.ts';
import { conflict, notFound } from '../../../core/errors.ts';
import { requireIdentity } from '../../../core/identity.ts';
import { newId, rfc3339 } from '../../../core/ids.ts';
import { assertMayManage } from '../access.ts';
import type { ApikeysEvents } from '../events.ts';
import type { ApikeysRepository, Project } from '../repository.ts';
import { commonErrors, createProjectBody, errorResponse, project as projectSchema, projectList, projectParams, type ProjectBody } from '../schemas.ts';
import { isReservedSlug, slugify, withRandomSuffix } from '../slugs.ts';

/** Fresh suffixes tried for a generated slug before giving up (each collides with odds ~1 in 1.7 M). */
const GENERATED_SLUG_ATTEMPTS = 8;

export interface ProjectRoutesDeps {
  repository: ApikeysRepository;
  events: ApikeysEvents;
  /** The platform domain: a project's host is `<slug>.<domain>`. */
  domain: string;
}

export function registerProjectRoutes(app: ServiceApp, { repository, events, domain }: ProjectRoutesDeps): void {
  const view = (p: Project): ProjectBody => ({ id: p.id, name: p.name, slug: p.slug, host: `${p.slug}.${domain}`, owners: p.owners, created_at: p.created_at });

  /** Stores the project under the given slug, or under the first free generated one. */
  async function insert(owner: string, name: string, slug: string | undefined): Promise<Project> {
    const base = { id: newId('project'), name, owners: [owner], created_at: rfc3339() };
    if (slug !== undefined) {
      if (isReservedSlug(slug)) throw conflict(`slug '${slug}' is reserved for the platform`);
      const project = { ...base, slug };
      if (!(await repository.createProject(project))) throw conflict(`slug '${slug}' is already taken`);
      return project;
    }
    const plain = slugify(name);
    // The plain slug first when it is usable; on a clash (checked first, or lost to a concurrent
    // create at insert time) a random suffix, retried a few times.
    if (plain !== '' && !isReservedSlug(plain) && !(await repository.slugTaken(plain))) {
      const project = { ...base, slug: plain };
      if (await repository.createProject(project)) return project;
    }
    for (let attempt = 0; attempt < GENERATED_SLUG_ATTEMPTS; attempt++) {
      const project = { ...base, slug: withRandomSuffix(plain) };
      if (await repository.createProject(project)) return project;
    }
    throw conflict(`no free slug found for '${name}'; pass a slug explicitly`);
  }

  app.post(
    '/v0/projects',
    {
      schema: {
        tags: ['projects'],
        summary: 'Create a project; its host <slug>.<domain> routes at once',
        body: createProjectBody,
        response: { 201: projectSchema, ...commonErrors, 403: errorResponse, 409: errorResponse },
      },
    },
    async (request, reply) => {
      const identity = requireIdentity(request);
      await assertMayManage(identity, repository);
      const project = await insert(identity.user.id, request.body.name, request.body.slug);
      await events.projectChanged({ id: project.id, slug: project.slug, op: 'created' });
      return reply.code(201).send(view(project));
    },
  );

  app.get(
    '/v0/projects',
    {
      schema: {
        tags: ['projects'],
        summary: "List the caller's projects in creation order",
        response: { 200: projectList, 401: errorResponse },
      },
    },
    async (request) => {
      const identity = requireIdentity(request);
      return (await repository.listProjects(identity.user.id)).map(view);
    },
  );

  app.get(
    '/v0/projects/:id',
    {
      schema: {
        tags: ['projects'],
        summary: 'Get a project the caller owns',
        params: projectParams,
        response: { 200: projectSchema, ...commonErrors, 404: errorResponse },
      },
    },
    async (request) => {
      const identity = requireIdentity(request);
      const project = await repository.getProject(identity.user.id, request.params.id);
      if (!project) throw notFound(`project ${request.params.id} not found`);
      return view(project);
    },
  );

  app.delete(
    '/v0/projects/:id',
    {
      schema: {
        tags: ['projects'],
        summary: 'Delete a project; its host stops routing and its slug is free at once',
        params: projectParams,
        response: { 200: projectSchema, ...commonErrors, 403: errorResponse, 404: errorResponse },
      },
    },
    async (request) => {
      const identity = requireIdentity(request);
      await assertMayManage(identity, repository);
      const project = await repository.deleteProject(identity.user.id, request.params.id);
      if (!project) throw notFound(`project ${request.params.id} not found`);
      await events.projectChanged({ id: project.id, slug: project.slug, op: 'deleted' });
      return view(project);
    },
  );
}
