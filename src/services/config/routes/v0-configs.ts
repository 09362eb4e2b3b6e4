import { Type } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { conflict, notFound, validationError } from '../../../core/errors.ts';
import { newId } from '../../../core/ids.ts';
import { patchOf, withoutNulls } from '../entries.ts';
import type { ConfigObject, ConfigRepository } from '../repository.ts';
import { CONFIG_ID_PATTERN, configObject, createBody, errors, idParams, patchBody } from '../schemas.ts';

const ID_PATTERN = new RegExp(CONFIG_ID_PATTERN);

/** v0 config objects: public, shared settings (config.md §2). */
export function registerV0Configs(app: ServiceApp, repository: ConfigRepository): void {
  const tags = ['v0 config objects'];

  app.get('/v0/configs', { schema: { tags, summary: 'List config objects in creation order', response: { 200: Type.Array(configObject) } } }, async () => repository.list());

  app.post(
    '/v0/configs',
    { schema: { tags, summary: 'Create a config object', body: createBody, response: { 201: configObject, ...errors } } },
    async (request, reply) => {
      const body = request.body ?? {};
      if (typeof body !== 'object' || Array.isArray(body)) throw validationError('body must be a JSON object');
      const object = { id: body.id ?? newId(), entries: withoutNulls(body.entries ?? {}) };
      if (!(await repository.create(object))) throw conflict(`config ${object.id} already exists`);
      return reply.code(201).send(object);
    },
  );

  app.get(
    '/v0/configs/:id',
    { schema: { tags, summary: 'Get a config object', params: idParams, response: { 200: configObject, ...errors } } },
    async (request, reply) => {
      const json = ID_PATTERN.test(request.params.id) ? await repository.getJson(request.params.id) : null;
      if (json === null) throw notFound('config not found');
      // Already JSON text: Fastify sends a string with a JSON content type as it is.
      return reply.type('application/json; charset=utf-8').send(json as unknown as ConfigObject);
    },
  );

  app.patch(
    '/v0/configs/:id',
    { schema: { tags, summary: 'Merge a patch into a config object; returns the whole object', params: idParams, body: patchBody, response: { 200: configObject, ...errors } } },
    async (request) => {
      const patch = patchOf(request.body);
      const object = ID_PATTERN.test(request.params.id) ? await repository.patch(request.params.id, patch) : null;
      if (!object) throw notFound('config not found');
      return object;
    },
  );

  app.delete(
    '/v0/configs/:id',
    { schema: { tags, summary: 'Delete a config object', params: idParams, response: { 204: Type.Null(), ...errors } } },
    async (request, reply) => {
      if (!ID_PATTERN.test(request.params.id) || !(await repository.delete(request.params.id))) throw notFound('config not found');
      return reply.code(204).send(null);
    },
  );
}
