import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { rfc3339 } from '../../../../core/ids.ts';
import { RunErrors } from '../../errors.ts';
import { consoleData, targetBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { answer, apply, consoleErrors, consoleSecurity, consoleTags, owned, target } from './common.ts';

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
      async (request) => {
        const user = requireIdentity(request).user.id;
        const row = await owned(deps, request.body.repository, user);
        const desired = await target(deps, row, request.body);
        const saved = await deps.repository.setDesired(row.name, desired, { action, user, at: rfc3339() });
        if (!saved) throw RunErrors.repositoryNotFound(row.name);
        await apply(app, deps, saved);
        return answer(deps, saved);
      },
    );
  }
}
