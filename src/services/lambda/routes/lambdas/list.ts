import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { projectOf } from '../../project.ts';
import { errors, lambdaList } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { lambdaView, security, tags } from './common.ts';

export const listLambdasSchema = {
  tags,
  security,
  operationId: 'listLambdas',
  summary: 'List lambdas',
  response: { 200: lambdaList, ...errors(401) },
};

/** `GET /api/v0/lambdas`: the caller's lambdas (on a project host, those of the project), secrets by name only. */
export function registerListLambdas(app: ServiceApp, { repository }: RouteDeps): void {
  app.get('/api/v0/lambdas', { schema: listLambdasSchema }, async (request) => {
    const owner = requireIdentity(request).user.id;
    const project = projectOf(request);
    const [lambdas, nextRuns] = await Promise.all([
      repository.list(owner, project),
      repository.nextRunsOf(owner, project),
    ]);
    return lambdas.map((lambda) => lambdaView(lambda, nextRuns.get(lambda.id) ?? null));
  });
}
