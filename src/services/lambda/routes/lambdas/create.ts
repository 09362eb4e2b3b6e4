import type { ServiceApp } from '../../../../core/app.ts';
import { newId } from '../../../../core/ids.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { checkNewEnv, secretNames } from '../../environment.ts';
import { LambdaErrors } from '../../errors.ts';
import { projectOf } from '../../project.ts';
import { NameTaken, type Lambda, type Language } from '../../repository.ts';
import { createBody, errors, lambdaObject } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { assertMayManage, checkLogger, checkSchedule, checkSyntax, lambdaView, security, tags } from './common.ts';

export const createLambdaSchema = {
  tags,
  security,
  operationId: 'createLambda',
  summary: 'Create a lambda',
  body: createBody,
  response: { 201: lambdaObject, ...errors(400, 401, 403, 409, 413, 503) },
};

/**
 * `POST /api/v0/lambdas` (README: Create / patch; Environment and secrets): 201 with the stored
 * lambda, its secrets by name only.
 */
export function registerCreateLambda(app: ServiceApp, deps: RouteDeps): void {
  app.post('/api/v0/lambdas', { schema: createLambdaSchema }, async (request, reply) => {
    const identity = requireIdentity(request);
    await assertMayManage(deps, request, identity.user.id);
    const body = request.body;
    let language: Language = body.language ?? 'javascript';
    if (body.runtime !== undefined) {
      if (body.runtime !== 'js' && body.runtime !== 'javascript') throw LambdaErrors.runtimeInvalid();
      if (body.language !== undefined && body.language !== 'javascript') throw LambdaErrors.runtimeDisagrees();
      language = 'javascript';
    }
    const { env, secrets } = checkNewEnv(body.env, body.secrets);
    const schedule = body.schedule ?? null;
    const scheduleTz = body.schedule_tz ?? null;
    const nextRunMs = checkSchedule(deps, language, schedule, scheduleTz);
    await checkSyntax(deps, language, body.code);
    const loggerId = body.logger_id ?? null;
    if (loggerId !== null) await checkLogger(deps, identity.user.id, loggerId);
    const id = newId();
    const names = secretNames(secrets);
    const lambda: Lambda = {
      id,
      created_timestamp: Math.floor(Date.now() / 1000),
      owner: identity.user.id,
      project_id: projectOf(request) ?? '',
      name: body.name,
      language,
      code: body.code,
      method: (body.method ?? 'ANY').toUpperCase(),
      path: body.path ?? `/${body.name}`,
      env,
      secret_names: names,
      logger_id: loggerId,
      schedule,
      schedule_tz: schedule === null ? null : scheduleTz,
    };
    try {
      await deps.repository.create(lambda, names.length === 0 ? null : deps.secrets.seal(id, secrets), nextRunMs);
    } catch (err) {
      if (err instanceof NameTaken) throw LambdaErrors.nameTaken(body.name);
      throw err;
    }
    if (nextRunMs !== null) deps.scheduleChanged();
    return reply.code(201).send(lambdaView(lambda, nextRunMs));
  });
}
