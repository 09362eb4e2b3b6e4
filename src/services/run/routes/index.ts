import type { ServiceApp } from '../../../core/app.ts';
import { registerGetConsole } from './console/get.ts';
import { registerListRepositories } from './console/list.ts';
import { registerConfigRoutes } from './console/config.ts';
import { registerStop } from './console/stop.ts';
import { registerTargetRoutes } from './console/target.ts';
import type { RouteDeps } from './deps.ts';
import { registerHealthRoutes } from './health.ts';
import { registerRegistry } from './registry/index.ts';

/** Every route of the run service (README), in the order the OpenAPI document lists them. */
export async function registerRoutes(app: ServiceApp, deps: RouteDeps): Promise<void> {
  // Public: version and health.
  registerHealthRoutes(app, deps);

  // The console API: read, start and roll back, stop, then env and volumes.
  registerGetConsole(app, deps);
  registerListRepositories(app, deps);
  registerTargetRoutes(app, deps);
  registerStop(app, deps);
  registerConfigRoutes(app, deps);

  // The push-only registry under /v2/ (hidden from the OpenAPI document).
  await registerRegistry(app, deps);
}
