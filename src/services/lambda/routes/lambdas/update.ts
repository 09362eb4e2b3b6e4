import type { ServiceApp } from '../../../../core/app.ts';
import { applyEnvChange, checkEnvChange } from '../../environment.ts';
import { LambdaErrors } from '../../errors.ts';
import { NameTaken, type LambdaChanges } from '../../repository.ts';
import { errors, lambdaObject, lambdaParams, patchBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import {
  assertMayManage,
  checkLogger,
  checkSchedule,
  checkSyntax,
  lambdaView,
  ownLambda,
  security,
  tags,
} from './common.ts';

export const updateLambdaSchema = {
  tags,
  security,
  operationId: 'updateLambda',
  summary: 'Modify a lambda',
  params: lambdaParams,
  body: patchBody,
  response: { 200: lambdaObject, ...errors(400, 401, 403, 404, 409, 413, 500, 503) },
};

/**
 * `PATCH /api/v0/lambdas/{lambda_id}` (README: Create / patch; Environment and secrets): the
 * changed lambda. `env` and `secrets` are merged into what is stored, in the write's transaction,
 * and checked on the result.
 */
export function registerUpdateLambda(app: ServiceApp, deps: RouteDeps): void {
  app.patch('/api/v0/lambdas/:lambda_id', { schema: updateLambdaSchema }, async (request) => {
    const lambda = await ownLambda(deps, request, request.params.lambda_id);
    await assertMayManage(deps, request, lambda.owner);
    const { method, env, secrets, schedule, schedule_tz, ...rest } = request.body;
    const change = { env, secrets };
    // The names and values by themselves first; the merged result in the write's transaction.
    checkEnvChange(change);
    // The schedule the lambda is left with is checked whole; `schedule: null` drops its time zone
    // too. Its next tick is written with it, computed again whenever schedule or zone is given.
    let scheduleChange: LambdaChanges = {};
    if (schedule !== undefined || schedule_tz !== undefined || rest.language !== undefined) {
      const nextSchedule = schedule === undefined ? lambda.schedule : schedule;
      const nextTz = schedule_tz !== undefined ? schedule_tz : schedule === null ? null : lambda.schedule_tz;
      const nextRunMs = checkSchedule(deps, rest.language ?? lambda.language, nextSchedule, nextTz);
      if (schedule !== undefined || schedule_tz !== undefined)
        scheduleChange = { schedule: nextSchedule, schedule_tz: nextTz, next_run_ms: nextRunMs };
    }
    if (rest.code !== undefined || rest.language !== undefined)
      await checkSyntax(deps, rest.language ?? lambda.language, rest.code ?? lambda.code);
    if (typeof rest.logger_id === 'string') await checkLogger(deps, lambda.owner, rest.logger_id);
    try {
      const updated = await deps.repository.update(
        lambda.id,
        { ...rest, ...(method === undefined ? {} : { method: method.toUpperCase() }), ...scheduleChange },
        env === undefined && secrets === undefined
          ? undefined
          : (stored) => applyEnvChange(lambda.id, stored, change, deps.secrets),
      );
      if (!updated) throw LambdaErrors.lambdaNotFound(lambda.id);
      if (scheduleChange.next_run_ms != null) deps.scheduleChanged();
      return lambdaView(updated, updated.schedule === null ? null : await deps.repository.nextRunOf(updated.id));
    } catch (err) {
      if (err instanceof NameTaken) throw LambdaErrors.nameTaken(request.body.name);
      throw err;
    }
  });
}
