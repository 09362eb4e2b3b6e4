import { Type } from 'typebox';
import type { ServiceApp } from '../../../../core/app.ts';
import { rfc3339 } from '../../../../core/ids.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import type { ActualState } from '../../driver.ts';
import { actualState, desiredState } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { consoleErrors, consoleSecurity, consoleTags, hostOf } from './common.ts';

const repositoryList = Type.Object({
  driver: Type.String({ description: 'the runtime driver: recording (runs nothing) or podman' }),
  repositories: Type.Array(
    Type.Object({
      repository: Type.String(),
      references: Type.Array(Type.String(), { description: 'pushed tags in first-push order' }),
      host: Type.Union([Type.String(), Type.Null()], { description: 'where it answers HTTP (<slug>.run.<domain>)' }),
      desired: desiredState,
      actual: actualState,
      created_at: Type.String({ description: 'when the first push created it (RFC 3339 UTC)' }),
    }),
  ),
});

/** `GET /api/console/repositories`: the caller's repositories, by name, with desired and actual state. */
export function registerListRepositories(app: ServiceApp, deps: RouteDeps): void {
  app.get(
    '/api/console/repositories',
    {
      schema: {
        tags: consoleTags,
        security: consoleSecurity,
        operationId: 'listRepositories',
        summary: "The caller's repositories with their tags, desired and actual state",
        response: { 200: repositoryList, ...consoleErrors },
      },
    },
    async (request) => {
      const user = requireIdentity(request).user.id;
      const { driver, repository } = deps;
      const owned = await repository.repositoriesOf(user);
      const names = owned.map((o) => o.row.name);
      let actual: Map<string, ActualState | null>;
      if (driver.statuses) actual = await driver.statuses(names);
      else if (driver.status) {
        const status = driver.status.bind(driver);
        actual = new Map(await Promise.all(names.map(async (n) => [n, await status(n)] as const)));
      } else actual = new Map();
      return {
        driver: driver.name,
        repositories: owned.map(({ row, references, createdAt }) => ({
          repository: row.name,
          references,
          host: hostOf(row, deps.domain),
          desired: row.desired,
          actual: actual.get(row.name) ?? null,
          created_at: rfc3339(new Date(createdAt)),
        })),
      };
    },
  );
}
