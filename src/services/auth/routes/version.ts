import type { ServiceApp } from '../../../core/app.ts';
import type { RouteDeps } from './deps.ts';

export const versionSchema = { summary: 'Service version (plain text)', produces: ['text/plain'] };

/** `GET /version`: the Stratus version as `text/plain; charset=utf-8`. */
export function registerVersion(app: ServiceApp, { version }: RouteDeps): void {
  app.get('/version', { schema: versionSchema }, async (_request, reply) =>
    reply.type('text/plain; charset=utf-8').send(version),
  );
}
