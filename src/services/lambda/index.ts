import { createServiceApp } from '../../core/app.ts';
import { LambdaBridges } from './bridge.ts';
import { egressAgent } from '../../core/egress.ts';
import { platformEgressPolicy, platformSecretsKey, type ServiceDefinition } from '../context.ts';
import { LambdaEnvironment } from './environment.ts';
import { InvocationHistory, type HistoryOptions } from './history.ts';
import { CronTicker, type CronOptions } from './cron.ts';
import { Invoker } from './invoke.ts';
import { LoggerIngest } from './logger-ingest.ts';
import { lambdaMigrations } from './migrations.ts';
import { OngoingInvocations, type OngoingOptions } from './ongoing.ts';
import { LambdaRepository } from './repository.ts';
import type { RouteDeps } from './routes/deps.ts';
import { registerRoutes } from './routes/index.ts';
import { LambdaRuntime, type RuntimeOptions } from './runtime/sandbox.ts';
import { LambdaSecrets } from './secrets.ts';

/**
 * Builds the lambda service; `limits` overrides what the settings `lambdaTimeoutSeconds`,
 * `lambdaMemoryMib` and `lambdaMaxResponseBytes` give the runtime, and sets the pool's size
 * (tests shorten and shrink them); `ongoingOptions` the lease and publication delay of the
 * ongoing invocations (tests shorten them); `historyOptions` the invocation history's batching
 * (its retention is the setting `lambdaInvocationHistory`); `cronOptions` the clock and poll of
 * the cron ticker (tests inject a clock and poll often; README: Cron schedules).
 */
export function lambdaServiceWith(
  limits: RuntimeOptions = {},
  ongoingOptions: OngoingOptions = {},
  historyOptions: Omit<HistoryOptions, 'keep'> = {},
  cronOptions: CronOptions = {},
): ServiceDefinition {
  return {
    name: 'lambda',
    migrations: lambdaMigrations,
    async build({ settings, store, logger, services, ports, metrics }) {
      const options: RuntimeOptions = {
        timeoutMs: settings.lambdaTimeoutSeconds * 1000,
        memoryLimitMiB: settings.lambdaMemoryMib,
        maxResponseBytes: settings.lambdaMaxResponseBytes,
        ...limits,
      };
      const app = await createServiceApp({
        name: 'lambda',
        domain: settings.domain,
        title: 'Lambda API',
        // The document's info.version is fixed at 1.0.0 (README: OpenAPI).
        version: '1.0.0',
        logger,
        description: 'Lambdas: management, invocation by id, owner mux and project hosts.',
        jsonForAnyContentType: false,
        openapiPath: null,
      });
      const runtime = new LambdaRuntime(options);
      // Running invocations, shared with every instance through the database (ongoing.ts).
      const ongoing = new OngoingInvocations(
        store.sql,
        (err) => logger.warn({ err }, 'could not publish the ongoing lambda invocations'),
        ongoingOptions,
      );
      app.addHook('onClose', async () => {
        runtime.close();
        try {
          await ongoing.close();
        } catch (err) {
          logger.warn({ err }, 'could not remove the ongoing lambda invocations of this instance');
        }
      });
      // fetch and the bindings (README: Fetch, Bindings): never to the platform's own ports.
      const policy = platformEgressPolicy({ settings, ports });
      const dispatcher = egressAgent(policy);
      app.addHook('onClose', async () => dispatcher.close());
      const bridges = new LambdaBridges({
        policy,
        dispatcher,
        services,
        limits: {
          maxRequests: settings.lambdaFetchRequests,
          maxConcurrent: settings.lambdaFetchConcurrency,
          maxResponseBytes: settings.lambdaFetchBytes,
          maxRedirects: settings.lambdaFetchRedirects,
        },
      });
      const repository = new LambdaRepository(store.sql, store.notifier);
      app.addHook('onClose', async () => repository.close());
      // The key of the lambdas' secrets: LAMBDA_SECRETS_KEY, else the data directory's key file,
      // made on first need (README: Environment and secrets).
      const secrets = new LambdaSecrets(platformSecretsKey({ settings, store, logger }, 'lambda secrets'));
      // What an invocation gets as its environment: env and decrypted secrets (environment.ts).
      const environment = new LambdaEnvironment(repository, secrets);
      // Every invocation's record, written in batches off the request path (history.ts); what
      // waits is written on close. Warnings never carry console lines or error messages.
      const history = new InvocationHistory(store.sql, (context, message) => logger.warn(context, message), {
        ...historyOptions,
        keep: settings.lambdaInvocationHistory,
      });
      // Console lines of lambdas that name a logger, ingested into it as the lambda's owner.
      const loggers = new LoggerIngest(services, (context, message) => logger.warn(context, message));
      app.addHook('onClose', async () => {
        await history.close();
        await loggers.flush();
      });
      // Captured console output and failures go to the server log with the invocation id.
      const invoker = new Invoker(
        runtime,
        (entry) => logger.info(entry, 'lambda invocation'),
        {
          domain: settings.domain,
          ownerConcurrency: settings.lambdaOwnerConcurrency,
          bridges,
          envOf: (lambda) => environment.partsFor(lambda),
        },
        ongoing,
        { history, loggers, ...(metrics ? { metrics } : {}) },
      );
      // The isolate pool at scrape time: plain figures the runtime keeps.
      const stopProbe = metrics?.probe('lambda', () => metrics.setLambdaPool(runtime.poolState()));
      app.addHook('onClose', async () => stopProbe?.());
      const now = cronOptions.now ?? Date.now;
      // Every lambda's schedule, each tick claimed in the database so it runs on one instance
      // (cron.ts).
      const ticker = new CronTicker(
        {
          repository,
          run: (lambda, trigger) => invoker.runCron(lambda, trigger),
          warn: (context, message) => logger.warn(context, message),
          feed: store.notifier,
        },
        { ...cronOptions, now },
      );
      const deps: RouteDeps = {
        repository,
        runtime,
        invoker,
        secrets,
        environment,
        services,
        history,
        now,
        scheduleChanged: () => ticker.wake(),
      };
      registerRoutes(app, deps);
      // The ticker's hook is added last so it runs first on close (Fastify closes in reverse):
      // its runs end before the runtime closes and the history writes what waits.
      app.addHook('onReady', async () => ticker.start());
      app.addHook('onClose', async () => ticker.close());
      return app;
    },
  };
}

/** Lambda service (README.md). */
export const lambdaService: ServiceDefinition = lambdaServiceWith();
