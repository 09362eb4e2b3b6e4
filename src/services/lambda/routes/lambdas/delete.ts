import type { ServiceApp } from '../../../../core/app.ts';
import { LambdaErrors } from '../../errors.ts';
import { deletedLambda, errors, lambdaParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { assertMayManage, ownLambda, security, tags } from './common.ts';

export const deleteLambdaSchema = {
  tags,
  security,
  operationId: 'deleteLambda',
  summary: 'Delete a lambda',
  params: lambdaParams,
  response: { 200: deletedLambda, ...errors(401, 403, 404) },
};

/** `DELETE /api/v0/lambdas/{lambda_id}`: answers the deleted lambda's id. */
export function registerDeleteLambda(app: ServiceApp, deps: RouteDeps): void {
  app.delete('/api/v0/lambdas/:lambda_id', { schema: deleteLambdaSchema }, async (request) => {
    const lambda = await ownLambda(deps, request, request.params.lambda_id);
    await assertMayManage(deps, request, lambda.owner);
    if (!(await deps.repository.delete(lambda.id))) throw LambdaErrors.lambdaNotFound(lambda.id);
    // After the lambda's row: no batch inserts history for it from now on (history.ts).
    await deps.history.deleteOf(lambda.id);
    return { id: lambda.id };
  });
}
