import type { FastifyRequest } from 'fastify';
import { createServiceApp } from '../../core/app.ts';
import type { ServiceDefinition } from '../../core/service.ts';
import { SchedulerEvents } from './events.ts';
import { SchedulerKeys } from './keys.ts';
import { schedulerMigrations } from './migrations.ts';
import { SchedulerRepository } from './repository.ts';
import { registerSchedulerRoutes } from './routes/schedulers.ts';
import { registerTaskRoutes } from './routes/tasks.ts';
import { apiKeySecurity } from './schemas.ts';

/** Scheduler (scheduler.md): named schedulers of delayed one-off tasks, leased to workers. */
export const schedulerService: ServiceDefinition = {
  name: 'scheduler',
  migrations: schedulerMigrations,
  async build({ settings, store, logger, version }) {
    const app = await createServiceApp({
      name: 'scheduler',
      title: 'Scheduler API',
      // The reference fixes the document's version (§9); the platform version is in the description.
      version: '1.0.0',
      logger,
      description: `Delayed one-off tasks in named schedulers, reserved under time-limited leases (Stratus ${version}).`,
      jsonForAnyContentType: true,
      openapiPath: null,
    });
    const repository = new SchedulerRepository(store.sql);
    // The generated key is printed on stderr once, not logged: log pipelines keep what they get.
    const keys = await SchedulerKeys.load(settings.schedulerApiKeys, repository, (line) => process.stderr.write(line));
    const events = new SchedulerEvents(store.notifier, (error) => logger.warn({ err: error }, 'scheduler notification failed'));
    app.addHook('onClose', async () => events.close());

    const deps = {
      repository,
      events,
      requireKey: async (request: FastifyRequest) => keys.check(request),
      now: () => Date.now(),
    };
    registerSchedulerRoutes(app, deps);
    registerTaskRoutes(app, deps);

    app.get('/openapi.json', { schema: { hide: true } }, async () => {
      const document = structuredClone(app.swagger()) as { openapi: string; paths: Record<string, Record<string, { security?: unknown }>>; components?: { securitySchemes?: Record<string, unknown> } };
      document.openapi = '3.1.0';
      document.components = {
        ...document.components,
        securitySchemes: {
          schedulerApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'A scheduler API key (SCHEDULER_API_KEYS)' },
          schedulerBearer: { type: 'http', scheme: 'bearer', description: 'A scheduler API key as a bearer token' },
        },
      };
      // Every method but GET needs a key (§2).
      for (const operations of Object.values(document.paths)) {
        for (const [method, operation] of Object.entries(operations)) if (method !== 'get') operation.security = apiKeySecurity;
      }
      return document;
    });
    return app;
  },
};
