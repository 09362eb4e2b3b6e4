import type { ServiceApp } from '../../../core/app.ts';
import type { RouteDeps } from './deps.ts';
import { registerV0Configs } from './v0-configs.ts';
import { registerV1Config } from './v1-config.ts';
import { registerVersion } from './version.ts';

/** Every route of the config service (README), in the order the OpenAPI document lists them. */
export function registerRoutes(app: ServiceApp, deps: RouteDeps): void {
  registerVersion(app, deps);
  // Public, shared config objects, then the caller's own entries map.
  registerV0Configs(app, deps);
  registerV1Config(app, deps);
}
