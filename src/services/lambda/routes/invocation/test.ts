import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { LambdaErrors } from '../../errors.ts';
import { projectOf } from '../../project.ts';
import { errors, lambdaParams, testInvocationBody, testInvocationResult } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { tags } from './common.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

export const testInvocationSchema = {
  tags,
  operationId: 'testLambda',
  security: SIGNED_IN,
  summary: "Test-run one of the caller's lambdas and get its response and console lines as data",
  description:
    "The console's Invoke: runs the lambda exactly as a request would (same limits, listed in /ongoing) with the given request, and answers the status, headers and body it produced together with the `console.log`/`warn`/`error` lines of that run. Defaults: the lambda's method and path, no query, no headers, no body.",
  params: lambdaParams,
  body: testInvocationBody,
  response: { 200: testInvocationResult, ...errors(400, 401, 404, 429) },
};

/** `POST /api/v0/lambdas/{lambda_id}/invoke` (README: Test runs): the owner's test run, answered as data. */
export function registerTestInvocation(app: ServiceApp, { repository, invoker }: RouteDeps): void {
  app.post('/api/v0/lambdas/:lambda_id/invoke', { schema: testInvocationSchema }, async (request) => {
    const owner = requireIdentity(request).user.id;
    const lambda = await repository.get(request.params.lambda_id);
    const project = projectOf(request);
    if (!lambda || lambda.owner !== owner || (project !== null && lambda.project_id !== project))
      throw LambdaErrors.lambdaNotFound(request.params.lambda_id);
    const input = request.body;
    const headers = Object.fromEntries(Object.entries(input.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
    return invoker.test(lambda, {
      method: (input.method ?? (lambda.method === 'ANY' ? 'GET' : lambda.method)).toUpperCase(),
      path: input.path ?? lambda.path,
      query: input.query ?? {},
      headers,
      body: input.body,
    });
  });
}
