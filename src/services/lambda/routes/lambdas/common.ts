import type { FastifyRequest } from 'fastify';
import { loggerOwnership } from '../../../logger-ingest.ts';
import type { Static } from 'typebox';
import { requireIdentity } from '../../../../core/identity.ts';
import { LambdaErrors } from '../../errors.ts';
import { projectOf } from '../../project.ts';
import type { Lambda, Language } from '../../repository.ts';
import type { lambdaObject } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';
import { rfc3339 } from '../../../../core/ids.ts';
import { nextTick, scheduleProblem } from '../../cron.ts';

export const tags = ['lambdas'];
export const security = SIGNED_IN;

/** JavaScript must parse (as a script or a module); static content is taken as is (README: Create / patch). */
export async function checkSyntax({ runtime }: RouteDeps, language: Language, code: string): Promise<void> {
  if (language !== 'javascript') return;
  const problem = await runtime.check(code);
  if (problem !== null) throw LambdaErrors.codeDoesNotParse(problem);
}

/**
 * A lambda as management routes answer it: env shown, secrets by name only, never their values;
 * `nextRunMs` its next tick (read apart: the cached lambda does not follow the ticks).
 */
export function lambdaView(lambda: Lambda, nextRunMs: number | null): Static<typeof lambdaObject> {
  const { secret_names, logger_id, schedule, schedule_tz, ...rest } = lambda;
  return {
    ...rest,
    secrets: secret_names,
    logger_id,
    schedule,
    schedule_tz,
    next_run_at: nextRunMs === null ? null : rfc3339(new Date(nextRunMs)),
  };
}

/**
 * The schedule a create or patch leaves the lambda with, checked (README: Cron schedules):
 * answers its first tick after now, null without a schedule; what is wrong is a 400.
 */
export function checkSchedule(
  { now }: RouteDeps,
  language: Language,
  schedule: string | null,
  tz: string | null,
): number | null {
  if (schedule === null) {
    if (tz !== null) throw LambdaErrors.scheduleTzWithoutSchedule();
    return null;
  }
  if (language !== 'javascript') throw LambdaErrors.scheduleOnStatic(language);
  const problem = scheduleProblem(schedule, tz);
  if (problem !== null) throw LambdaErrors.scheduleInvalid(problem);
  return nextTick({ schedule, schedule_tz: tz }, now());
}

/**
 * A logger_id must be a logger the lambda's owner has (README: Create / patch): the logs service
 * is asked as the owner. 200 → fine; 400, 403 or 404 → 400; no service calls, a failed call or
 * any other answer → 503.
 */
export async function checkLogger({ services }: RouteDeps, owner: string, loggerId: string): Promise<void> {
  const ownership = await loggerOwnership(services, owner, loggerId);
  if (ownership === 'not_owned') throw LambdaErrors.loggerNotOwned(loggerId);
  if (ownership === 'unreachable') throw LambdaErrors.logsUnreachable();
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
