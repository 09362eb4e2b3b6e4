import { createServiceApp } from '../../core/app.ts';
import type { ServiceDefinition } from '../context.ts';
import { createEvents } from './events.ts';
import { apikeysMigrations } from './migrations.ts';
import { ApikeysRepository } from './repository.ts';
import type { RouteDeps } from './routes/deps.ts';
import { registerRoutes } from './routes/index.ts';

export { KEY_REVOKED_TOPIC, PROJECTS_CHANGED_TOPIC, type KeyRevokedEvent, type ProjectChangedEvent } from './events.ts';
export {
  findApiKey,
  findProjectById,
  findProjectBySlug,
  listAllProjects,
  originListed,
  type Project,
  type Scope,
  type StoredApiKey,
} from './repository.ts';
export { RESERVED_SLUGS } from './slugs.ts';

/** Projects and API keys (README.md): the credentials the gateway checks and the project hosts it routes. */
export const apikeysService: ServiceDefinition = {
  name: 'apikeys',
  migrations: apikeysMigrations,
  async build({ settings, store, logger, version }) {
    const app = await createServiceApp({
      name: 'apikeys',
      domain: settings.domain,
      version,
      logger,
      description: 'API keys (Api-Key + Api-Secret machine credentials) and projects (project hosts <slug>.<domain>).',
      // `curl -d` sends form-encoded bodies; they are JSON here whatever the Content-Type.
      jsonForAnyContentType: true,
    });
    const repository = new ApikeysRepository(store.sql);
    const events = createEvents(store.notifier, logger);
    const deps: RouteDeps = { repository, events, domain: settings.domain };
    await registerRoutes(app, deps);
    return app;
  },
};
