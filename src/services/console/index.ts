import { fileURLToPath } from 'node:url';
import { Type } from 'typebox';
import { createServiceApp } from '../../core/app.ts';
import type { ServiceDefinition } from '../context.ts';
import { MOCK_ROUTES } from './mock.ts';
import { consoleFiles } from './static.ts';
import { ANONYMOUS, type RouteDocs } from '../../core/openapi.ts';

/** Where `npm run build:console` puts the web console. */
export const CONSOLE_BUILD_DIR = fileURLToPath(new URL('../../../dist/console/', import.meta.url));

export interface ConsoleOptions {
  /** The built web console (tests point it elsewhere). */
  buildDir?: string;
}

/**
 * The console: `/version`, the seven-route mock API under `/fakeapi/`, the web
 * console's runtime settings, and the built web console with a single-page-app fallback. No
 * route reads the identity: the console is the same for everyone; the UI signs in itself.
 */
export function createConsoleService(options: ConsoleOptions = {}): ServiceDefinition {
  return {
    name: 'console',
    migrations: { owner: 'console', migrations: [] },
    async build({ settings, logger, version }) {
      const files = consoleFiles(options.buildDir ?? CONSOLE_BUILD_DIR);
      const app = await createServiceApp({
        name: 'console',
        domain: settings.domain,
        title: 'Stratus console',
        version,
        logger,
        description: 'The web console, its settings, and a mock API with canned data for demo and development.',
        notFoundFallback: async (request, reply) => {
          const path = request.url.split('?')[0] ?? '/';
          // Anything else under /fakeapi/ is a strict 404 naming the route (no wildcard answer, no page).
          if (path === '/fakeapi' || path.startsWith('/fakeapi/')) {
            await reply.code(404).send({
              error: { status: 404, code: 'not_found', message: `route ${request.method} ${path} not found` },
            });
            return true;
          }
          return files(request, reply);
        },
      });
      app.get(
        '/version',
        {
          schema: {
            tags: ['console'],
            operationId: 'getVersion',
            security: ANONYMOUS,
            summary: 'The running Stratus version, as text',
            response: { 200: Type.String() },
            openapi: { responses: { 200: { 'text/plain': null } } } satisfies RouteDocs,
          },
        },
        async (_request, reply) => reply.type('text/plain; charset=utf-8').send(version),
      );
      for (const route of MOCK_ROUTES) {
        app.get(
          route.path,
          {
            schema: {
              tags: ['mock'],
              operationId: route.operationId,
              security: ANONYMOUS,
              summary: route.summary,
              response: { 200: Type.Unknown() },
            },
          },
          async (_request, reply) => reply.type('application/json; charset=utf-8').send(route.body),
        );
      }
      const runtime = {
        demo: settings.consoleDemo,
        domain: settings.domain,
        providers: settings.authProviders.map((p) => ({ name: p.name })),
        signup: settings.signup === 'open',
        version,
      };
      app.get(
        '/console-config.json',
        {
          schema: {
            tags: ['console'],
            operationId: 'getConsoleConfig',
            security: ANONYMOUS,
            summary:
              "The web console's runtime settings: demo mode (CONSOLE_DEMO), the platform domain, the sign-in providers, whether sign-up is open (SIGNUP)",
            response: {
              200: Type.Object({
                demo: Type.Boolean(),
                domain: Type.String(),
                providers: Type.Array(Type.Object({ name: Type.String() })),
                signup: Type.Boolean(),
                version: Type.String(),
              }),
            },
          },
        },
        async (_request, reply) => reply.header('cache-control', 'no-cache').send(runtime),
      );
      return app;
    },
  };
}

export const consoleService: ServiceDefinition = createConsoleService();
