import type { ServiceApp } from '../../../core/app.ts';
import { COLLECTION_ACTIONS, DATABASE_ACTIONS } from '../actions.ts';
import { COLLECTION_ACTION_DOCS, DATABASE_ACTION_DOCS } from './action-docs.ts';

/**
 * `GET /openapi.json`: OpenAPI 3.1.0 generated from the route schemas, each colon action its own
 * path with a `post` operation (README: Service endpoints). The generic action routes stand for
 * all of them, so their own `post` operations are left out.
 */
export function registerOpenApi(app: ServiceApp): void {
  app.get('/openapi.json', { schema: { hide: true } }, async () => {
    const document = structuredClone(app.swagger()) as {
      openapi: string;
      paths: Record<string, Record<string, unknown>>;
    };
    document.openapi = '3.1.0';
    const databasePath = '/v1/databases/{databaseId}';
    const collectionPath = '/v1/databases/{databaseId}/collections/{collection}';
    const operation = (
      summary: string,
      body: unknown,
      status: number,
      response: unknown,
      parameters: string[],
      tag: string,
    ) => ({
      tags: [tag],
      summary,
      parameters: parameters.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
      ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: body } } } } : {}),
      responses: {
        [status]: {
          description: 'Success',
          ...(response ? { content: { 'application/json': { schema: response } } } : {}),
        },
      },
    });
    for (const action of DATABASE_ACTIONS) {
      const docs = DATABASE_ACTION_DOCS[action];
      document.paths[`${databasePath}:${action}`] = {
        post: operation(docs.summary, docs.body, docs.status, docs.response, ['databaseId'], 'databases'),
      };
    }
    for (const action of COLLECTION_ACTIONS) {
      const docs = COLLECTION_ACTION_DOCS[action];
      document.paths[`${collectionPath}:${action}`] = {
        post: operation(
          docs.summary,
          docs.body,
          docs.status,
          docs.response,
          ['databaseId', 'collection'],
          'collections',
        ),
      };
    }
    // The generic action route stands for all of the above.
    delete document.paths[collectionPath]?.post;
    delete document.paths[databasePath]?.post;
    return document;
  });
}
