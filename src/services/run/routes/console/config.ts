import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import type { Volume } from '../../driver.ts';
import { RunErrors } from '../../errors.ts';
import { consoleData, envBody, errorBody, loggerBody, volumesBody } from '../../schemas.ts';
import { loggerOwnership } from '../../../logger-ingest.ts';
import type { RouteDeps } from '../deps.ts';
import { answer, consoleErrors, consoleSecurity, consoleTags, owned, saveConfig } from './common.ts';

const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `PUT /api/console/env` and `PUT /api/console/volumes`: replace the list; a running repository is re-applied. */
export function registerConfigRoutes(app: ServiceApp, deps: RouteDeps): void {
  app.put(
    '/api/console/env',
    {
      schema: {
        tags: consoleTags,
        security: consoleSecurity,
        operationId: 'replaceEnvironment',
        summary: 'Replace the environment variables',
        description:
          'Each key matches ^[A-Za-z_][A-Za-z0-9_]*$ and appears once; [] clears the list. Answers the console data.',
        body: envBody,
        response: { 200: consoleData, ...consoleErrors },
      },
    },
    async (request) => {
      const user = requireIdentity(request).user.id;
      const seen = new Set<string>();
      for (const [i, entry] of request.body.env.entries()) {
        if (!ENV_KEY.test(entry.key)) throw RunErrors.envKeyInvalid(i, entry.key);
        if (seen.has(entry.key)) throw RunErrors.envKeyTwice(i, entry.key);
        seen.add(entry.key);
      }
      const env = request.body.env.map((e) => ({ key: e.key, desired_value: e.desired_value }));
      return saveConfig(app, deps, request.body.repository, user, 'env', env);
    },
  );

  app.put(
    '/api/console/volumes',
    {
      schema: {
        tags: consoleTags,
        security: consoleSecurity,
        operationId: 'replaceVolumes',
        summary: 'Replace the volumes',
        description:
          'name non-empty and unique; target an absolute path; mode rw (default) or ro. Answers the console data.',
        body: volumesBody,
        response: { 200: consoleData, ...consoleErrors },
      },
    },
    async (request) => {
      const user = requireIdentity(request).user.id;
      const seen = new Set<string>();
      const volumes: Volume[] = [];
      for (const [i, entry] of request.body.volumes.entries()) {
        if (seen.has(entry.name)) throw RunErrors.volumeNameTwice(i, entry.name);
        seen.add(entry.name);
        if (!entry.target.startsWith('/')) throw RunErrors.volumeTargetNotAbsolute(i, entry.target);
        volumes.push({ name: entry.name, target: entry.target, mode: entry.mode ?? 'rw' });
      }
      return saveConfig(app, deps, request.body.repository, user, 'volumes', volumes);
    },
  );

  app.put(
    '/api/console/logger',
    {
      schema: {
        tags: consoleTags,
        security: consoleSecurity,
        operationId: 'setRepositoryLogger',
        summary: "Send the container's output to a logger of yours (null: nowhere)",
        description:
          'The logger is checked with the logs service as you (400 when it is not yours, 503 when the logs service does not answer). Applies to the running container at once. Answers the console data.',
        body: loggerBody,
        response: { 200: consoleData, ...consoleErrors, 503: errorBody },
      },
    },
    async (request) => {
      const user = requireIdentity(request).user.id;
      const row = await owned(deps, request.body.repository, user);
      const loggerId = request.body.logger_id;
      if (loggerId !== null) {
        const ownership = await loggerOwnership(deps.services, user, loggerId);
        if (ownership === 'not_owned') throw RunErrors.loggerNotOwned(loggerId);
        if (ownership === 'unreachable') throw RunErrors.logsUnreachable();
      }
      const saved = await deps.repository.setLogger(row.name, loggerId);
      if (!saved) throw RunErrors.repositoryNotFound(row.name);
      return answer(deps, saved);
    },
  );
}
