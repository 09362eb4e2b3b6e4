import type { FastifyRequest } from 'fastify';
import type { ServiceApp } from '../../../core/app.ts';
import { conflict, forbidden, notFound, validationError } from '../../../core/errors.ts';
import { newId } from '../../../core/ids.ts';
import { requireIdentity } from '../../../core/identity.ts';
import { NameTaken, type Lambda, type Language, type LambdaRepository } from '../repository.ts';
import { createBody, errors, lambdaObject, lambdaParams, patchBody } from '../schemas.ts';
import { projectOf } from '../project.ts';
import { Type } from 'typebox';
import type { LambdaRuntime } from '../runtime/sandbox.ts';

/** Management of the caller's lambdas (lambda.md §3). */
export function registerManagement(app: ServiceApp, repository: LambdaRepository, runtime: LambdaRuntime): void {
  /** JavaScript must parse (as a script or a module); static content is taken as is. */
  const checkSyntax = async (language: Language, code: string): Promise<void> => {
    if (language !== 'javascript') return;
    const problem = await runtime.check(code);
    if (problem !== null) throw validationError(`body.code does not parse: ${problem}`);
  };

  const tags = ['lambdas'];
  const security = [{ gatewayIdentity: [] }];

  /** The caller's lambda, scoped to the project host if any; foreign or unknown → 404. */
  const own = async (request: FastifyRequest, id: string): Promise<Lambda> => {
    const identity = requireIdentity(request);
    const lambda = await repository.get(id);
    const project = projectOf(request);
    if (!lambda || lambda.owner !== identity.user.id || (project !== null && lambda.project_id !== project)) {
      throw notFound(`no lambda ${id}`);
    }
    return lambda;
  };

  /** On a project host, changes need an owner of the project (403 otherwise). */
  const mayManage = async (request: FastifyRequest, userId: string): Promise<void> => {
    const project = projectOf(request);
    if (project !== null && !(await repository.ownsProject(userId, project))) {
      throw forbidden('only owners of this project can manage its lambdas');
    }
  };

  app.post('/api/v0/lambdas', {
    schema: { tags, security, summary: 'Create a lambda', body: createBody, response: { 201: lambdaObject, ...errors(400, 401, 403, 409, 413) } },
  }, async (request, reply) => {
    const identity = requireIdentity(request);
    await mayManage(request, identity.user.id);
    const body = request.body;
    let language: Language = body.language ?? 'javascript';
    if (body.runtime !== undefined) {
      if (body.runtime !== 'js' && body.runtime !== 'javascript') throw validationError(`body.runtime must be js or javascript`);
      if (body.language !== undefined && body.language !== 'javascript') throw validationError('body.runtime disagrees with body.language');
      language = 'javascript';
    }
    await checkSyntax(language, body.code);
    const lambda: Lambda = {
      id: newId(),
      created_timestamp: Math.floor(Date.now() / 1000),
      owner: identity.user.id,
      project_id: projectOf(request) ?? '',
      name: body.name,
      language,
      code: body.code,
      method: (body.method ?? 'ANY').toUpperCase(),
      path: body.path ?? `/${body.name}`,
    };
    try {
      await repository.create(lambda);
    } catch (err) {
      if (err instanceof NameTaken) throw conflict(`a lambda named ${JSON.stringify(body.name)} already exists`);
      throw err;
    }
    return reply.code(201).send(lambda);
  });

  app.get('/api/v0/lambdas', {
    schema: { tags, security, summary: 'List lambdas', response: { 200: Type.Array(lambdaObject, { description: 'List of lambdas' }), ...errors(401) } },
  }, async (request) => repository.list(requireIdentity(request).user.id, projectOf(request)));

  app.get('/api/v0/lambdas/:lambda_id', {
    schema: { tags, security, summary: 'Get a lambda', params: lambdaParams, response: { 200: lambdaObject, ...errors(401, 404) } },
  }, async (request) => own(request, request.params.lambda_id));

  app.patch('/api/v0/lambdas/:lambda_id', {
    schema: { tags, security, summary: 'Modify a lambda', params: lambdaParams, body: patchBody, response: { 200: lambdaObject, ...errors(400, 401, 403, 404, 409, 413) } },
  }, async (request) => {
    const lambda = await own(request, request.params.lambda_id);
    await mayManage(request, lambda.owner);
    const { method, ...rest } = request.body;
    if (rest.code !== undefined || rest.language !== undefined) await checkSyntax(rest.language ?? lambda.language, rest.code ?? lambda.code);
    try {
      const updated = await repository.update(lambda.id, method === undefined ? rest : { ...rest, method: method.toUpperCase() });
      if (!updated) throw notFound(`no lambda ${lambda.id}`);
      return updated;
    } catch (err) {
      if (err instanceof NameTaken) throw conflict(`a lambda named ${JSON.stringify(request.body.name)} already exists`);
      throw err;
    }
  });

  app.delete('/api/v0/lambdas/:lambda_id', {
    schema: { tags, security, summary: 'Delete a lambda', params: lambdaParams, response: { 200: Type.Object({ id: Type.String() }), ...errors(401, 403, 404) } },
  }, async (request) => {
    const lambda = await own(request, request.params.lambda_id);
    await mayManage(request, lambda.owner);
    if (!(await repository.delete(lambda.id))) throw notFound(`no lambda ${lambda.id}`);
    return { id: lambda.id };
  });
}
