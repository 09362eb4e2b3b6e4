import type { ServiceApp } from '../../../core/app.ts';
import type { RouteDeps } from './deps.ts';
import { registerMe } from './me.ts';
import { registerLogin } from './session/login.ts';
import { registerLogout } from './session/logout.ts';
import { registerSessionToken } from './session/token.ts';
import { registerSignup } from './signup.ts';
import { registerSsoCallback } from './sso/callback.ts';
import { registerSsoLogin } from './sso/login.ts';
import { registerSsoToken } from './sso/token.ts';
import { registerVersion } from './version.ts';

/** Every route of the auth service (README), in the order the OpenAPI document lists them. */
export async function registerRoutes(app: ServiceApp, deps: RouteDeps): Promise<void> {
  registerVersion(app, deps);

  // Sessions: password login, logout, and bearer sessions for the web console.
  registerLogin(app, deps);
  await registerLogout(app, deps);
  registerSessionToken(app, deps);

  // Users.
  registerMe(app, deps);
  registerSignup(app, deps);

  // Single sign-on with OpenID Connect providers.
  registerSsoLogin(app, deps);
  registerSsoCallback(app, deps);
  registerSsoToken(app, deps);
}
