import { createServiceApp } from '../../core/app.ts';
import type { ServiceDefinition } from '../context.ts';
import { ensureBootstrapAdmin } from './bootstrap.ts';
import { authMigrations } from './migrations.ts';
import { OidcProviders } from './oidc.ts';
import type { RouteDeps } from './routes/deps.ts';
import { registerRoutes } from './routes/index.ts';
import { startSweeper } from './sweeper.ts';
import { LoginThrottle } from './throttle.ts';

// What the gateway and the single sign-on code use.
export { SESSION_COOKIE, clearSessionCookie, cookieDomain, readSessionCookie, sessionCookie } from './cookies.ts';
export { loginResponse, startSession } from './login.ts';
export { loginResponseSchema, type LoginResponse } from './schemas.ts';
export {
  SESSION_LIFETIME_MS,
  createSession,
  createUser,
  deleteSession,
  extendSession,
  findSessionByToken,
  findUserByEmail,
  findUserById,
  findUserByIdentity,
  linkIdentity,
  saveSsoState,
  takeSsoState,
  updateUserProfile,
  type Session,
  type User,
} from './repository.ts';
export { authMigrations } from './migrations.ts';
export { OidcProviders, resolveUser } from './oidc.ts';
export { runUsersCommand, USERS_OPTIONS } from './cli.ts';

/** Users, password login, sessions and single sign-on (README.md), on `auth.<domain>`. */
export const authService: ServiceDefinition = {
  name: 'auth',
  migrations: authMigrations,
  async build({ settings, store, logger, version }) {
    const connection = store.sql;
    await ensureBootstrapAdmin(connection, settings, logger);

    const app = await createServiceApp({
      name: 'auth',
      domain: settings.domain,
      version,
      logger,
      description:
        'Users, password login, sessions (stratus_session cookie or bearer token) and OpenID Connect single sign-on.',
      // `curl -d` sends form-encoded bodies; they are JSON here whatever the Content-Type.
      jsonForAnyContentType: true,
    });
    const deps: RouteDeps = {
      connection,
      settings,
      logger,
      throttle: new LoginThrottle(connection),
      providers: new OidcProviders(settings.authProviders),
      version,
    };
    await registerRoutes(app, deps);

    const stopSweeper = startSweeper(connection, logger);
    app.addHook('onClose', async () => {
      await stopSweeper();
    });
    return app;
  },
};
