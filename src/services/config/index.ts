import { createServiceApp } from '../../core/app.ts';
import type { ServiceDefinition } from '../context.ts';
import { configMigrations } from './migrations.ts';
import { ConfigRepository } from './repository.ts';
import type { RouteDeps } from './routes/deps.ts';
import { registerRoutes } from './routes/index.ts';

/** Config store (README.md): public v0 config objects and per-user v1 entries. */
export const configService: ServiceDefinition = {
  name: 'config',
  migrations: configMigrations,
  async build({ settings, store, logger, version }) {
    const app = await createServiceApp({
      name: 'config',
      domain: settings.domain,
      version,
      logger,
      description: 'Config objects (v0, public) and per-user entries maps (v1).',
    });
    const repository = new ConfigRepository(store.sql, store.notifier);
    app.addHook('onClose', async () => repository.close());
    const deps: RouteDeps = { repository, version };
    registerRoutes(app, deps);
    return app;
  },
};
