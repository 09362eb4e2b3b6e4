import { createServiceApp, type ServiceApp } from '../../core/app.ts';
import { requireIdentity } from '../../core/identity.ts';
import type { ServiceDefinition } from '../context.ts';
import { createEvents } from './events.ts';
import { apikeysMigrations } from './migrations.ts';
import { ApikeysRepository } from './repository.ts';
import { registerKeyRoutes } from './routes/keys.ts';
import { registerProjectRoutes } from './routes/projects.ts';

export { KEY_REVOKED_TOPIC, PROJECTS_CHANGED_TOPIC, type KeyRevokedEvent, type ProjectChangedEvent } from './events.ts';
export { findApiKey, findProjectById, findProjectBySlug, listAllProjects, type Project, type Scope, type StoredApiKey } from './repository.ts';
export { RESERVED_SLUGS } from './slugs.ts';

/** Projects and API keys (apikeys.md): the credentials the gateway checks and the project hosts it routes. */
export const apikeysService: ServiceDefinition = {
  name: 'apikeys',
  migrations: apikeysMigrations,
  async build({ settings, store, logger, version }) {
    const app = await createServiceApp({
      name: 'apikeys',
      version,
      logger,
      description: 'API keys (Api-Key + Api-Secret machine credentials) and projects (project hosts <slug>.<domain>).',
      // `curl -d` sends form-encoded bodies; they are JSON here whatever the Content-Type.
      jsonForAnyContentType: true,
    });
    const repository = new ApikeysRepository(store.sql);
    const events = createEvents(store.notifier, logger);

    // Every route needs identity, checked before the body is parsed or validated so an anonymous
    // caller learns nothing but 401. Scoped to this plugin: unknown paths stay 404 and the
    // OpenAPI document stays public.
    await app.register(async (routes: ServiceApp) => {
      routes.addHook('onRequest', async (request) => {
        requireIdentity(request);
      });
      registerKeyRoutes(routes, { repository, events });
      registerProjectRoutes(routes, { repository, events, domain: settings.domain });
    });
    return app;
  },
};
