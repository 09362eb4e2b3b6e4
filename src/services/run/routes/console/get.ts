import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { consoleData, repositoryQuery } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { answer, consoleErrors, consoleSecurity, consoleTags, owned } from './common.ts';

/** `GET /api/console?repository=`: the console data of one of the caller's repositories. */
export function registerGetConsole(app: ServiceApp, deps: RouteDeps): void {
  app.get(
    '/api/console',
    {
      schema: {
        tags: consoleTags,
        security: consoleSecurity,
        operationId: 'getConsole',
        summary: 'Console data of a repository',
        querystring: repositoryQuery,
        response: { 200: consoleData, ...consoleErrors },
      },
    },
    async (request) => {
      const user = requireIdentity(request).user.id;
      return answer(deps, await owned(deps, request.query.repository, user));
    },
  );
}
