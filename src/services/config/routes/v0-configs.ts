import { Type } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { newId } from '../../../core/ids.ts';
import { patchOf, withoutNulls } from '../entries.ts';
import { ConfigErrors } from '../errors.ts';
import type { ConfigObject } from '../repository.ts';
import { CONFIG_ID_PATTERN, configObject, createBody, errors, idParams, patchBody } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';
import { ANONYMOUS } from '../../../core/openapi.ts';

const ID_PATTERN = new RegExp(CONFIG_ID_PATTERN);
const tags = ['v0 config objects'];

export const listConfigsSchema = {
  tags,
  operationId: 'listConfigs',
  security: ANONYMOUS,
  summary: 'List config objects in creation order',
  response: { 200: Type.Array(configObject) },
};
export const createConfigSchema = {
  tags,
  operationId: 'createConfig',
  security: ANONYMOUS,
  summary: 'Create a config object',
  body: createBody,
  response: { 201: configObject, ...errors },
};
export const getConfigSchema = {
  tags,
  operationId: 'getConfig',
  security: ANONYMOUS,
  summary: 'Get a config object',
  params: idParams,
  response: { 200: configObject, ...errors },
};
export const patchConfigSchema = {
  tags,
  operationId: 'patchConfig',
  security: ANONYMOUS,
  summary: 'Merge a patch into a config object; returns the whole object',
  params: idParams,
  body: patchBody,
  response: { 200: configObject, ...errors },
};
export const deleteConfigSchema = {
  tags,
  operationId: 'deleteConfig',
  security: ANONYMOUS,
  summary: 'Delete a config object',
  params: idParams,
  response: { 204: Type.Null(), ...errors },
};

/** v0 config objects (README): public, shared settings under `/v0/configs`. */
export function registerV0Configs(app: ServiceApp, { repository }: RouteDeps): void {
  app.get('/v0/configs', { schema: listConfigsSchema }, async () => repository.list());

  app.post('/v0/configs', { schema: createConfigSchema }, async (request, reply) => {
    const body = request.body ?? {};
    if (typeof body !== 'object' || Array.isArray(body)) throw ConfigErrors.bodyNotObject();
    const object = { id: body.id ?? newId(), entries: withoutNulls(body.entries ?? {}) };
    if (!(await repository.create(object))) throw ConfigErrors.configExists(object.id);
    return reply.code(201).send(object);
  });

  app.get('/v0/configs/:id', { schema: getConfigSchema }, async (request, reply) => {
    const json = ID_PATTERN.test(request.params.id) ? await repository.getJson(request.params.id) : null;
    if (json === null) throw ConfigErrors.configNotFound();
    // Already JSON text: Fastify sends a string with a JSON content type as it is.
    return reply.type('application/json; charset=utf-8').send(json as unknown as ConfigObject);
  });

  app.patch('/v0/configs/:id', { schema: patchConfigSchema }, async (request) => {
    const patch = patchOf(request.body);
    const object = ID_PATTERN.test(request.params.id) ? await repository.patch(request.params.id, patch) : null;
    if (!object) throw ConfigErrors.configNotFound();
    return object;
  });

  app.delete('/v0/configs/:id', { schema: deleteConfigSchema }, async (request, reply) => {
    if (!ID_PATTERN.test(request.params.id) || !(await repository.delete(request.params.id)))
      throw ConfigErrors.configNotFound();
    return reply.code(204).send(null);
  });
}
