import type { ServiceApp } from '../../../../core/app.ts';
import { errors, lambdaObject, lambdaParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { lambdaView, ownLambda, security, tags } from './common.ts';

export const getLambdaSchema = {
  tags,
  security,
  operationId: 'getLambda',
  summary: 'Get a lambda',
  params: lambdaParams,
  response: { 200: lambdaObject, ...errors(401, 404) },
};

/** `GET /api/v0/lambdas/{lambda_id}`: one of the caller's lambdas, its secrets by name only. */
export function registerGetLambda(app: ServiceApp, deps: RouteDeps): void {
  app.get('/api/v0/lambdas/:lambda_id', { schema: getLambdaSchema }, async (request) => {
    const lambda = await ownLambda(deps, request, request.params.lambda_id);
    return lambdaView(lambda, lambda.schedule === null ? null : await deps.repository.nextRunOf(lambda.id));
  });
}
