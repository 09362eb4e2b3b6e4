import type { ServiceApp } from '../../../../core/app.ts';
import { errors, invocationList, invocationsQuery, lambdaParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { ownLambda, security, tags } from './common.ts';

/** The schema of the history route; `kept` is the invocations kept per lambda (the largest `limit`). */
export const listInvocationsSchema = (kept: number) => ({
  tags,
  security,
  operationId: 'listLambdaInvocations',
  summary: "A lambda's recent invocations, newest first",
  description:
    'Every run of the lambda (test runs, /run, /api/v0/run, the owner router, project hosts) with its status, error, console lines and counts of fetches and binding calls. The newest LAMBDA_INVOCATION_HISTORY (default 100) of each lambda are kept. A run is listed within about half a second, and at once on the instance that ran it.',
  params: lambdaParams,
  querystring: invocationsQuery(kept),
  response: { 200: invocationList, ...errors(400, 401, 404) },
});

/** `GET /api/v0/lambdas/{lambda_id}/invocations` (README: Invocation history and logs): the owner's only, like GET of the lambda. */
export function registerListInvocations(app: ServiceApp, deps: RouteDeps): void {
  const { history } = deps;
  app.get(
    '/api/v0/lambdas/:lambda_id/invocations',
    { schema: listInvocationsSchema(history.retention) },
    async (request) => {
      const lambda = await ownLambda(deps, request, request.params.lambda_id);
      return { invocations: await history.list(lambda.id, request.query.limit ?? Math.min(20, history.retention)) };
    },
  );
}
