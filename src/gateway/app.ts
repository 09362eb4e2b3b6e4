import { Type } from 'typebox';
import type { FastifyBaseLogger } from 'fastify';
import { createServiceApp, type ServiceApp } from '../core/app.ts';

/** The gateway's own endpoints on `gateway.<domain>` (and `/version`, `/v0/`, `/openapi.json` on `api.<domain>`). */
export async function buildGatewayApp(options: { version: string; logger: FastifyBaseLogger }): Promise<ServiceApp> {
  const app = await createServiceApp({
    name: 'gateway',
    version: options.version,
    logger: options.logger,
    description: 'The Stratus gateway: routing by virtual host and path.',
  });
  app.get(
    '/version',
    { schema: { summary: 'The running Stratus version (plain text)', produces: ['text/plain'], response: { 200: Type.String() } } },
    async (_request, reply) => reply.type('text/plain; charset=utf-8').send(options.version),
  );
  return app;
}
