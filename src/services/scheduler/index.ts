import { createServiceApp } from '../../core/app.ts';
import type { ServiceDefinition } from '../context.ts';
import { SchedulerEvents } from './events.ts';
import { SchedulerKeys } from './keys.ts';
import { schedulerMigrations } from './migrations.ts';
import { SchedulerRepository } from './repository.ts';
import type { RouteDeps } from './routes/deps.ts';
import { registerRoutes } from './routes/index.ts';

/** Scheduler (README.md): named schedulers of delayed one-off tasks, leased to workers. */
export const schedulerService: ServiceDefinition = {
  name: 'scheduler',
  migrations: schedulerMigrations,
  async build({ settings, store, logger, version }) {
    const app = await createServiceApp({
      name: 'scheduler',
      domain: settings.domain,
      title: 'Scheduler API',
      // The API document's version is fixed at 1.0.0 (README: OpenAPI); the platform version is in the description.
      version: '1.0.0',
      logger,
      description: `Delayed one-off tasks in named schedulers, reserved under time-limited leases (Stratus ${version}).`,
      jsonForAnyContentType: true,
      openapiPath: null,
    });
    const repository = new SchedulerRepository(store.sql);
    // The generated key is printed on stderr once, not logged: log pipelines keep what they get.
    const keys = await SchedulerKeys.load(settings.schedulerApiKeys, repository, (line) => process.stderr.write(line));
    const events = new SchedulerEvents(store.notifier, (error) =>
      logger.warn({ err: error }, 'scheduler notification failed'),
    );
    app.addHook('onClose', async () => events.close());

    const deps: RouteDeps = {
      repository,
      events,
      requireKey: async (request) => keys.check(request),
      now: () => Date.now(),
    };
    registerRoutes(app, deps);
    return app;
  },
};
