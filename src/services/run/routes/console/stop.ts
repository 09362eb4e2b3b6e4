import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { rfc3339 } from '../../../../core/ids.ts';
import { RunErrors } from '../../errors.ts';
import { consoleData, repositoryBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { answer, apply, consoleErrors, consoleSecurity, consoleTags, owned } from './common.ts';

/** `POST /api/console/stop`: reference and digest are kept; a stop of a stopped repository records nothing. */
export function registerStop(app: ServiceApp, deps: RouteDeps): void {
  app.post(
    '/api/console/stop',
    {
      schema: {
        tags: consoleTags,
        security: consoleSecurity,
        summary: 'Stop a repository (reference and digest are kept)',
        body: repositoryBody,
        response: { 200: consoleData, ...consoleErrors },
      },
    },
    async (request) => {
      const user = requireIdentity(request).user.id;
      const row = await owned(deps, request.body.repository, user);
      // Stopping a stopped repository records nothing new, but the driver is still asked (idempotent).
      const entry = row.desired.state === 'stopped' ? null : { action: 'stop' as const, user, at: rfc3339() };
      const saved = await deps.repository.setDesired(row.name, { ...row.desired, state: 'stopped' }, entry);
      if (!saved) throw RunErrors.repositoryNotFound(row.name);
      await apply(app, deps, saved);
      return answer(deps, saved);
    },
  );
}
