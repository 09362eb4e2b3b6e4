import type { ServiceApp } from '../../../../core/app.ts';
import { LambdaErrors } from '../../errors.ts';
import { projectOf } from '../../project.ts';
import type { RouteDeps } from '../deps.ts';
import { readBody } from './bodies.ts';

/**
 * Project hosts (README: Invocation): every path except /api/v0/… and /run/… is the project's mux,
 * whatever routes this app has (so /me or /mux/… on a project host are the project's paths too).
 * An `onRequest` hook, so it answers before any route is matched or any body parsed.
 */
export function registerProjectHosts(app: ServiceApp, { repository, invoker }: RouteDeps): void {
  app.addHook('onRequest', async (request, reply) => {
    const project = projectOf(request);
    if (project === null) return;
    const path = request.url.split('?')[0] ?? '/';
    if (path === '/api/v0' || path.startsWith('/api/v0/') || path.startsWith('/run/')) return;
    const body = await readBody(request);
    const lambda = await repository.route({ projectId: project }, request.method, path);
    if (!lambda) throw LambdaErrors.noRoute(request.method, path);
    return invoker.serve(lambda, request, reply, path, body, 'project');
  });
}
