import { createServiceApp } from '../../core/app.ts';
import type { ServiceDefinition } from '../context.ts';
import { configMigrations } from './migrations.ts';
import { ConfigRepository } from './repository.ts';
import { registerV0Configs } from './routes/v0-configs.ts';
import { registerV1Config } from './routes/v1-config.ts';

/** Config store: public v0 config objects and per-user v1 entries (config.md). */
export const configService: ServiceDefinition = {
  name: 'config',
  migrations: configMigrations,
  async build({ store, logger, version }) {
    const app = await createServiceApp({
      name: 'config',
      version,
      logger,
      description: 'Config objects (v0, public) and per-user entries maps (v1).',
    });
    const repository = new ConfigRepository(store.sql);
    app.get('/version', { schema: { summary: 'Service version (plain text)', produces: ['text/plain'] } }, async (_request, reply) =>
      reply.type('text/plain; charset=utf-8').send(version),
    );
    registerV0Configs(app, repository);
    registerV1Config(app, repository);
    return app;
  },
};
