import type { FastifyReply, FastifyRequest } from 'fastify';
import { parseTrigger, TRIGGER_HEADER } from '../../../../core/trigger.ts';
import { LambdaErrors } from '../../errors.ts';
import { projectOf } from '../../project.ts';
import { errors } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';

/** Invocation routes answer every method. */
export const ANY = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

export const tags = ['invocation'];

/** The errors an invocation may answer. */
export const invocationErrors = errors(400, 404, 413, 429, 500);

/**
 * Runs the lambda of the `lambda_id` path parameter for the request: only the owner's when
 * `owner` is given, and on a project host only one of that project; 404 otherwise.
 */
export async function runById(
  { repository, invoker }: RouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  owner: string | null,
): Promise<FastifyReply> {
  const { lambda_id } = request.params as { lambda_id: string };
  const lambda = await repository.get(lambda_id);
  const project = projectOf(request);
  if (!lambda || (owner !== null && lambda.owner !== owner) || (project !== null && lambda.project_id !== project)) {
    throw LambdaErrors.lambdaNotFound(lambda_id);
  }
  // The owner's own run is `run`, the public one by id `http` (README: Invocation history and logs);
  // a run the platform starts as the owner (a cron tick, a task: README: Triggers) says so in a
  // header that no client can send through the public port.
  const triggerData = owner === null ? null : parseTrigger(request.headers[TRIGGER_HEADER]);
  return invoker.serve(
    lambda,
    request,
    reply,
    lambda.path,
    request.body,
    owner === null ? 'http' : 'run',
    triggerData ?? undefined,
  );
}
