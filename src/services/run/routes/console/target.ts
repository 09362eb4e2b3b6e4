import type { ServiceApp } from '../../../../core/app.ts';
import { consoleData, targetBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { changeDesired, consoleErrors, consoleSecurity, consoleTags, target } from './common.ts';

/**
 * `POST /api/console/start` and `POST /api/console/rollback`: run the repository at a reference or
 * digest, recorded in the history as `start` or `rollback`.
 */
export function registerTargetRoutes(app: ServiceApp, deps: RouteDeps): void {
  for (const action of ['start', 'rollback'] as const) {
    app.post(
      `/api/console/${action}`,
      {
        schema: {
          tags: consoleTags,
          security: consoleSecurity,
          operationId: action === 'start' ? 'startRepository' : 'rollBackRepository',
          summary:
            action === 'start'
              ? 'Start a repository at a reference or digest'
              : 'Roll back a repository to a reference or digest',
          description:
            'Exactly one of `reference` (a tag) or `digest`. Any reference or manifest of the repository is accepted.',
          body: targetBody,
          response: { 200: consoleData, ...consoleErrors },
        },
      },
      async (request) =>
        changeDesired(app, deps, request, request.body.repository, async (row) => ({
          desired: await target(deps, row, request.body),
          action,
        })),
    );
  }
}
