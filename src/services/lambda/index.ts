import { createServiceApp } from '../../core/app.ts';
import { requireIdentity } from '../../core/identity.ts';
import type { ServiceDefinition } from '../context.ts';
import { projectOf } from './project.ts';
import { Invoker } from './invoke.ts';
import { lambdaMigrations } from './migrations.ts';
import { LambdaRepository } from './repository.ts';
import { registerAccount } from './routes/account.ts';
import { registerInvocation } from './routes/invocation.ts';
import { registerManagement } from './routes/management.ts';
import { LambdaRuntime, type RuntimeOptions } from './runtime/sandbox.ts';

/**
 * Builds the lambda service; `limits` overrides what the settings `lambdaTimeoutSeconds`,
 * `lambdaMemoryMib` and `lambdaMaxResponseBytes` give the runtime, and sets the pool's size
 * (tests shorten and shrink them).
 */
export function lambdaServiceWith(limits: RuntimeOptions = {}): ServiceDefinition {
  return {
    name: 'lambda',
    migrations: lambdaMigrations,
    async build({ settings, store, logger }) {
      const options: RuntimeOptions = {
        timeoutMs: settings.lambdaTimeoutSeconds * 1000,
        memoryLimitMiB: settings.lambdaMemoryMib,
        maxResponseBytes: settings.lambdaMaxResponseBytes,
        ...limits,
      };
      const app = await createServiceApp({
        name: 'lambda',
        title: 'Lambda API',
        // The spec fixes the document's info.version (lambda.md §6.3).
        version: '1.0.0',
        logger,
        description: 'Lambdas: management, invocation by id, owner mux and project hosts.',
        jsonForAnyContentType: false,
        openapiPath: null,
      });
      const runtime = new LambdaRuntime(options);
      app.addHook('onClose', async () => runtime.close());
      // Captured console output and failures go to the server log with the invocation id.
      const invoker = new Invoker(runtime, (entry) => logger.info(entry, 'lambda invocation'), {
        domain: settings.domain,
        ownerConcurrency: settings.lambdaOwnerConcurrency,
      });
      const repository = new LambdaRepository(store.sql);
      // Identity comes before validation: an anonymous call with a bad body is a 401, not a 400.
      app.addHook('onRequest', async (request) => {
        const path = request.url.split('?')[0] ?? '/';
        if (path === '/api/v0' || path.startsWith('/api/v0/')) {
          requireIdentity(request);
        } else if ((path === '/me' || path === '/ongoing') && projectOf(request) === null) {
          requireIdentity(request);
        }
      });
      registerManagement(app, repository, runtime);
      registerInvocation(app, repository, invoker);
      registerAccount(app, invoker);
      return app;
    },
  };
}

/** Lambda service (lambda.md, decisions 15–18). */
export const lambdaService: ServiceDefinition = lambdaServiceWith();
