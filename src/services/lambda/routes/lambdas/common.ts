import type { FastifyRequest } from 'fastify';
import { requireIdentity } from '../../../../core/identity.ts';
import { LambdaErrors } from '../../errors.ts';
import { projectOf } from '../../project.ts';
import type { Lambda, Language } from '../../repository.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

export const tags = ['lambdas'];
export const security = SIGNED_IN;

/** JavaScript must parse (as a script or a module); static content is taken as is (README: Create / patch). */
export async function checkSyntax({ runtime }: RouteDeps, language: Language, code: string): Promise<void> {
  if (language !== 'javascript') return;
  const problem = await runtime.check(code);
  if (problem !== null) throw LambdaErrors.codeDoesNotParse(problem);
}

/** The caller's lambda, scoped to the project host if any; foreign or unknown → 404. */
export async function ownLambda({ repository }: RouteDeps, request: FastifyRequest, id: string): Promise<Lambda> {
  const identity = requireIdentity(request);
  const lambda = await repository.get(id);
  const project = projectOf(request);
  if (!lambda || lambda.owner !== identity.user.id || (project !== null && lambda.project_id !== project)) {
    throw LambdaErrors.lambdaNotFound(id);
  }
  return lambda;
}

/** On a project host, changes need an owner of the project (403 otherwise). */
export async function assertMayManage(
  { repository }: RouteDeps,
  request: FastifyRequest,
  userId: string,
): Promise<void> {
  const project = projectOf(request);
  if (project !== null && !(await repository.ownsProject(userId, project))) throw LambdaErrors.notProjectOwner();
}
