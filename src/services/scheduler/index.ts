import { createServiceApp } from '../../core/app.ts';
import { egressAgent } from '../../core/egress.ts';
import { SealingKey } from '../../core/sealing.ts';
import { platformEgressPolicy, platformSecretsKey, type ServiceDefinition } from '../context.ts';
import { DeliveryEngine } from './delivery.ts';
import { SchedulerEvents } from './events.ts';
import { SchedulerKeys } from './keys.ts';
import { schedulerMigrations } from './migrations.ts';
import { SchedulerRepository } from './repository.ts';
import type { RouteDeps } from './routes/deps.ts';
import { registerRoutes } from './routes/index.ts';

/** The longest one webhook request may take. */
const WEBHOOK_TIMEOUT_MS = 30_000;
/** Per-scheduler task counts are read at most this often for metrics. */
const SCHEDULER_PROBE_TTL_MS = 15_000;

/** Scheduler (README.md): named schedulers of delayed one-off tasks, leased to workers. */
export const schedulerService: ServiceDefinition = {
  name: 'scheduler',
  migrations: schedulerMigrations,
  async build({ settings, store, logger, version, services, ports, metrics }) {
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

    // Webhook secrets are sealed with the key of lambda secrets (README: Delivery): LAMBDA_SECRETS_KEY,
    // else the same key file in the data directory, read or made on first need.
    const sealing = new SealingKey(platformSecretsKey({ settings, store, logger }, 'webhook secrets'));
    // Webhooks go where a lambda's fetch may go (core/egress.ts), never to the platform's own ports.
    const policy = platformEgressPolicy({ settings, ports });
    const dispatcher = egressAgent(policy);
    const lambdaTimeoutMs = settings.lambdaTimeoutSeconds * 1000;
    const delivery = new DeliveryEngine({
      repository,
      events,
      logger,
      now: () => Date.now(),
      sealing,
      services,
      policy,
      dispatcher,
      concurrency: settings.schedulerDeliveryConcurrency,
      leaseMs:
        settings.schedulerDeliveryLeaseSeconds !== undefined
          ? settings.schedulerDeliveryLeaseSeconds * 1000
          : Math.max(lambdaTimeoutMs, WEBHOOK_TIMEOUT_MS) + 30_000,
      // The lambda stops itself at its timeout; a little more covers the call around it.
      lambdaTimeoutMs: lambdaTimeoutMs + 5_000,
      webhookTimeoutMs: WEBHOOK_TIMEOUT_MS,
      lambdaMaxBodyBytes: settings.lambdaMaxResponseBytes,
      ...(metrics ? { metrics } : {}),
    });
    // Tasks per scheduler at scrape time (README.md: Metrics), read again at most every 15 s: the
    // counts are the list's own (in slices on SQLite), the dead list one grouped count.
    const stopProbe = metrics?.probe(
      'scheduler',
      async () => {
        const [rows, dead] = await Promise.all([repository.listSchedulers(Date.now()), repository.deadCounts()]);
        metrics.setSchedulers(
          rows.map((row) => ({
            scheduler: row.id,
            scheduled: Number(row.total) - Number(row.inflight),
            inflight: Number(row.inflight),
            dead: dead.get(row.id) ?? 0,
          })),
        );
      },
      SCHEDULER_PROBE_TTL_MS,
    );
    // Started once the app is ready (migrations ran); stopped before the notifier and store close.
    app.addHook('onReady', async () => delivery.start());
    app.addHook('onClose', async () => {
      stopProbe?.();
      await delivery.close();
      await dispatcher.close();
      events.close();
    });

    const deps: RouteDeps = {
      repository,
      events,
      requireKey: async (request) => keys.check(request),
      now: () => Date.now(),
      sealing,
      services,
    };
    registerRoutes(app, deps);
    return app;
  },
};
