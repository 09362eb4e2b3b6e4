import type { ServiceApp } from '../../../core/app.ts';
import type { RouteDeps } from './deps.ts';
import { ANONYMOUS, type RouteDocs } from '../../../core/openapi.ts';

export const versionSchema = {
  operationId: 'getVersion',
  security: ANONYMOUS,
  summary: 'Service version (plain text)',
  openapi: { responses: { 200: { 'text/plain': { type: 'string', example: '0.1.0' } } } } satisfies RouteDocs,
};

/** `GET /version` (README): the Stratus version as `text/plain; charset=utf-8`. */
export function registerVersion(app: ServiceApp, { version }: RouteDeps): void {
  app.get('/version', { schema: versionSchema }, async (_request, reply) =>
    reply.type('text/plain; charset=utf-8').send(version),
  );
}
