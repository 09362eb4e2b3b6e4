import type { ServiceApp } from '../../../core/app.ts';
import { requireIdentity } from '../../../core/identity.ts';
import type { RouteDeps } from './deps.ts';
import { registerCreateKey } from './keys/create.ts';
import { registerListKeys } from './keys/list.ts';
import { registerRevokeKey } from './keys/revoke.ts';
import { registerCreateProject } from './projects/create.ts';
import { registerDeleteProject } from './projects/delete.ts';
import { registerGetProject } from './projects/get.ts';
import { registerListProjects } from './projects/list.ts';
import { registerUpdateProject } from './projects/update.ts';

/** Every route of the apikeys service (README), in the order the OpenAPI document lists them. */
export async function registerRoutes(app: ServiceApp, deps: RouteDeps): Promise<void> {
  // Every route needs identity, checked before the body is parsed or validated so an anonymous
  // caller learns nothing but 401. Scoped to this plugin: unknown paths stay 404 and the
  // OpenAPI document stays public.
  await app.register(async (routes: ServiceApp) => {
    routes.addHook('onRequest', async (request) => {
      requireIdentity(request);
    });

    // API keys.
    registerCreateKey(routes, deps);
    registerListKeys(routes, deps);
    registerRevokeKey(routes, deps);

    // Projects.
    registerCreateProject(routes, deps);
    registerListProjects(routes, deps);
    registerGetProject(routes, deps);
    registerUpdateProject(routes, deps);
    registerDeleteProject(routes, deps);
  });
}
