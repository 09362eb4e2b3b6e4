import type { ServiceApp } from '../../../core/app.ts';
import { requireIdentity } from '../../../core/identity.ts';
import { projectOf } from '../project.ts';
import { registerAccount } from './account.ts';
import type { RouteDeps } from './deps.ts';
import { registerInvocationBodies, registerJsonBodies } from './invocation/bodies.ts';
import { registerOwnerMux } from './invocation/mux.ts';
import { registerProjectHosts } from './invocation/project-hosts.ts';
import { registerRunById } from './invocation/run.ts';
import { registerTestInvocation } from './invocation/test.ts';
import { registerCreateLambda } from './lambdas/create.ts';
import { registerDeleteLambda } from './lambdas/delete.ts';
import { registerGetLambda } from './lambdas/get.ts';
import { registerListInvocations } from './lambdas/invocations.ts';
import { registerListLambdas } from './lambdas/list.ts';
import { registerUpdateLambda } from './lambdas/update.ts';

/**
 * Every route and hook of the lambda service (README: Routes), in the order the OpenAPI document
 * lists the routes. The two `onRequest` hooks run in the order they are added here: identity
 * first, then the project hosts' mux.
 */
export function registerRoutes(app: ServiceApp, deps: RouteDeps): void {
  // Identity comes before validation: an anonymous call with a bad body is a 401, not a 400.
  app.addHook('onRequest', async (request) => {
    // Every request passes here: the path without building the array a split would.
    const query = request.url.indexOf('?');
    const path = query < 0 ? request.url : request.url.slice(0, query);
    if (path === '/api/v0' || path.startsWith('/api/v0/')) {
      requireIdentity(request);
    } else if ((path === '/me' || path === '/ongoing') && projectOf(request) === null) {
      requireIdentity(request);
    }
  });

  // JSON bodies whose syntax errors never quote the body (it may carry secrets).
  registerJsonBodies(app);

  // Management of the caller's lambdas.
  registerCreateLambda(app, deps);
  registerListLambdas(app, deps);
  registerGetLambda(app, deps);
  registerUpdateLambda(app, deps);
  registerDeleteLambda(app, deps);
  registerListInvocations(app, deps);

  // Invocation: the owner's test run, by id, through the owner mux, and on project hosts.
  registerInvocationBodies(app);
  registerTestInvocation(app, deps);
  registerRunById(app, deps);
  registerOwnerMux(app, deps);
  registerProjectHosts(app, deps);

  // The caller's account: running invocations, user record, the OpenAPI document.
  registerAccount(app, deps);
}
