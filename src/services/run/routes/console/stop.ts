import type { ServiceApp } from '../../../../core/app.ts';
import { consoleData, repositoryBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { changeDesired, consoleErrors, consoleSecurity, consoleTags } from './common.ts';

/** `POST /api/console/stop`: reference and digest are kept; a stop of a stopped repository records nothing. */
export function registerStop(app: ServiceApp, deps: RouteDeps): void {
  app.post(
    '/api/console/stop',
    {
      schema: {
        tags: consoleTags,
        security: consoleSecurity,
        operationId: 'stopRepository',
        summary: 'Stop a repository (reference and digest are kept)',
        body: repositoryBody,
        response: { 200: consoleData, ...consoleErrors },
      },
    },
    async (request) =>
      changeDesired(app, deps, request, request.body.repository, (row) => ({
        desired: { ...row.desired, state: 'stopped' },
        // Stopping a stopped repository records nothing new, but the driver is still asked (idempotent).
        action: row.desired.state === 'stopped' ? null : 'stop',
      })),
  );
}
