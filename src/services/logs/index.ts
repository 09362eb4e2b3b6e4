import { createServiceApp } from '../../core/app.ts';
import type { ServiceDefinition } from '../context.ts';
import { LogsAccess } from './access.ts';
import { LogFilters } from './filters.ts';
import { logsMigrations } from './migrations.ts';
import { LoggerRepository } from './repository.ts';
import type { LogsLimits, RouteDeps } from './routes/deps.ts';
import { registerRoutes } from './routes/index.ts';
import { LogStats } from './stats.ts';
import { FollowHub } from './streams.ts';

export type { LogsLimits } from './routes/deps.ts';

/**
 * The logging service (README.md). Its limits come from the settings (`LOGS_MAX_BYTES`,
 * `LOGS_MAX_INGEST_BYTES`); tests may override them here.
 */
export function createLogsService(overrides: Partial<LogsLimits> = {}): ServiceDefinition {
  return {
    name: 'logs',
    migrations: logsMigrations,
    async build({ settings, store, logger, version, instance, metrics }) {
      const limits: LogsLimits = {
        maxBytes: settings.logsMaxBytes,
        maxIngestBytes: settings.logsMaxIngestBytes,
        ...overrides,
      };
      const app = await createServiceApp({
        name: 'logs',
        domain: settings.domain,
        title: 'Stratus logs',
        version,
        logger,
        description:
          'Logging: loggers with owners and API keys, raw line and event ingest, filtered and followed streams.',
        jsonForAnyContentType: true,
      });
      const loggers = new LoggerRepository(store.sql);
      const access = new LogsAccess(loggers, store.notifier);
      const hub = new FollowHub(store.notifier);
      const stats = new LogStats(instance);
      const filters = new LogFilters();
      app.addHook('onClose', async () => {
        hub.close();
        access.close();
        await filters.close();
      });
      const deps: RouteDeps = { loggers, access, hub, stats, filters, limits, ...(metrics ? { metrics } : {}) };
      registerRoutes(app, deps);
      return app;
    },
  };
}

export const logsService: ServiceDefinition = createLogsService();
