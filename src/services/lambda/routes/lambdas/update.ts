import type { ServiceApp } from '../../../../core/app.ts';
import { LambdaErrors } from '../../errors.ts';
import { NameTaken } from '../../repository.ts';
import { errors, lambdaObject, lambdaParams, patchBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { assertMayManage, checkSyntax, ownLambda, security, tags } from './common.ts';

export const updateLambdaSchema = {
  tags,
  security,
  operationId: 'updateLambda',
  summary: 'Modify a lambda',
  params: lambdaParams,
  body: patchBody,
  response: { 200: lambdaObject, ...errors(400, 401, 403, 404, 409, 413) },
};

/** `PATCH /api/v0/lambdas/{lambda_id}` (README: Create / patch): the changed lambda. */
export function registerUpdateLambda(app: ServiceApp, deps: RouteDeps): void {
  app.patch('/api/v0/lambdas/:lambda_id', { schema: updateLambdaSchema }, async (request) => {
    const lambda = await ownLambda(deps, request, request.params.lambda_id);
    await assertMayManage(deps, request, lambda.owner);
    const { method, ...rest } = request.body;
    if (rest.code !== undefined || rest.language !== undefined)
      await checkSyntax(deps, rest.language ?? lambda.language, rest.code ?? lambda.code);
    try {
      const updated = await deps.repository.update(
        lambda.id,
        method === undefined ? rest : { ...rest, method: method.toUpperCase() },
      );
      if (!updated) throw LambdaErrors.lambdaNotFound(lambda.id);
      return updated;
    } catch (err) {
      if (err instanceof NameTaken) throw LambdaErrors.nameTaken(request.body.name);
      throw err;
    }
  });
}
