import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { errors, lambdaParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { ANY, invocationErrors, runById, tags } from './common.ts';
import { SIGNED_IN, SIGNED_IN_OR_ANONYMOUS, type RouteDocs } from '../../../../core/openapi.ts';

export const runOwnLambdaSchema = {
  tags,
  operationId: 'runOwnLambda',
  security: SIGNED_IN,
  summary: "Run one of the caller's lambdas (any method)",
  params: lambdaParams,
  openapi: {
    // Whatever the lambda answers: its status, headers and body.
    responses: { 200: { '*/*': { description: "The lambda's response" } } },
  } satisfies RouteDocs,
  response: { ...invocationErrors, ...errors(401) },
};

export const runLambdaSchema = {
  tags,
  operationId: 'runLambda',
  security: SIGNED_IN_OR_ANONYMOUS,
  summary: 'Run a lambda publicly (any method)',
  params: lambdaParams,
  openapi: {
    // Whatever the lambda answers: its status, headers and body.
    responses: { 200: { '*/*': { description: "The lambda's response" } } },
  } satisfies RouteDocs,
  response: invocationErrors,
};

/** `/api/v0/run/{lambda_id}` (the owner's) and `/run/{lambda_id}` (anyone's), any method (README: Invocation). */
export function registerRunById(app: ServiceApp, deps: RouteDeps): void {
  app.route({
    method: [...ANY],
    url: '/api/v0/run/:lambda_id',
    schema: runOwnLambdaSchema,
    handler: async (request, reply) => runById(deps, request, reply, requireIdentity(request).user.id),
  });
  app.route({
    method: [...ANY],
    url: '/run/:lambda_id',
    schema: runLambdaSchema,
    handler: async (request, reply) => runById(deps, request, reply, null),
  });
}
