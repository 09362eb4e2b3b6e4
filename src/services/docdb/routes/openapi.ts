import type { ServiceApp } from '../../../core/app.ts';
import { asOpenApi31, openApiDocument, SIGNED_IN, type OpenApiDocument } from '../../../core/openapi.ts';
import { errorBody } from '../../../core/schemas.ts';
import { COLLECTION_ACTIONS, DATABASE_ACTIONS } from '../actions.ts';
import { COLLECTION_ACTION_DOCS, DATABASE_ACTION_DOCS } from './action-docs.ts';

/**
 * `GET /openapi.json`: OpenAPI 3.1.0 generated from the route schemas, each colon action its own
 * path with a `post` operation (README: Service endpoints). The generic action routes stand for
 * all of them, so their own `post` operations are left out.
 */
export function registerOpenApi(app: ServiceApp): void {
  app.get('/openapi.json', { schema: { hide: true } }, async (request) => openApiDocument(app, request, addActions));
}

interface ActionDocs {
  operationId: string;
  summary: string;
  body: unknown;
  status: number;
  response: unknown;
  bodyMedia?: readonly string[];
  responseMedia?: string;
}

function addActions(document: OpenApiDocument): void {
  asOpenApi31(document);
  const databasePath = '/v1/databases/{databaseId}';
  const collectionPath = '/v1/databases/{databaseId}/collections/{collection}';
  const error = { description: 'Error envelope', content: { 'application/json': { schema: errorBody } } };
  const operation = (docs: ActionDocs, parameters: string[], tag: string) => ({
    operationId: docs.operationId,
    tags: [tag],
    summary: docs.summary,
    // An owner's identity or a key of the database (Api-Key + Api-Secret).
    security: SIGNED_IN,
    parameters: parameters.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
    ...(docs.body
      ? {
          requestBody: {
            required: true,
            content: Object.fromEntries(
              (docs.bodyMedia ?? ['application/json']).map((type) => [type, { schema: docs.body }]),
            ),
          },
        }
      : {}),
    responses: {
      [docs.status]: {
        description: 'Success',
        ...(docs.response
          ? { content: { [docs.responseMedia ?? 'application/json']: { schema: docs.response } } }
          : {}),
      },
      400: error,
      401: error,
      403: error,
      404: error,
    },
  });
  for (const action of DATABASE_ACTIONS)
    document.paths[`${databasePath}:${action}`] = {
      post: operation(DATABASE_ACTION_DOCS[action], ['databaseId'], 'databases'),
    };
  for (const action of COLLECTION_ACTIONS)
    document.paths[`${collectionPath}:${action}`] = {
      post: operation(COLLECTION_ACTION_DOCS[action], ['databaseId', 'collection'], 'collections'),
    };
  // The generic action route stands for all of the above.
  delete document.paths[collectionPath]?.post;
  delete document.paths[databasePath]?.post;
}
