import { Type } from 'typebox';
import type { ServiceApp } from '../../../../core/app.ts';
import { MAX_NESTING, nestedDeeperThan, type JsonObject } from '../../../../core/json.ts';
import { DocdbErrors } from '../../errors.ts';
import { DEFAULT_DEFAULTS } from '../../repository/index.ts';
import { databaseParams } from '../../schemas.ts';
import { scopedSecurity } from '../databases/common.ts';
import type { RouteDeps } from '../deps.ts';
import { checkCollectionName, sendJson } from './common.ts';

export const createCollectionSchema = {
  tags: ['collections'],
  operationId: 'createCollection',
  security: scopedSecurity,
  summary: 'Create a collection',
  params: databaseParams,
  body: Type.Object(
    {
      name: Type.String(),
      defaults: Type.Optional(Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()])),
    },
    { additionalProperties: true },
  ),
};

/** `POST /v1/databases/:databaseId/collections`: 201 with the record; missing or null defaults are `{"id":"uuid()"}`. */
export function registerCreateCollection(app: ServiceApp, { documents, access }: RouteDeps): void {
  app.post('/v1/databases/:databaseId/collections', { schema: createCollectionSchema }, async (request, reply) => {
    const database = await access.authorize(request, request.params.databaseId);
    const { name } = request.body;
    checkCollectionName(name);
    const defaults = (request.body.defaults ?? DEFAULT_DEFAULTS) as JsonObject;
    if (nestedDeeperThan(defaults, MAX_NESTING)) throw DocdbErrors.defaultsTooDeep(MAX_NESTING);
    if (!(await documents.createCollection(database.id, name, defaults))) throw DocdbErrors.collectionExists();
    return sendJson(reply, await documents.collectionRecord(database.id, name), 201);
  });
}
