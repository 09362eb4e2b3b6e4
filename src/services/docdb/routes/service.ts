import { Type } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import type { DocdbAccess } from '../access.ts';
import { COLLECTION_ACTIONS, DATABASE_ACTIONS } from '../actions.ts';
import type { DatabaseRepository } from '../databases.ts';
import type { DocumentStore } from '../documents.ts';
import { invalidJson } from '../body.ts';
import { COLLECTION_ACTION_DOCS } from './action-docs.ts';
import { DATABASE_ACTION_DOCS } from './databases.ts';

export interface ServiceRouteDeps {
  version: string;
  databases: DatabaseRepository;
  documents: DocumentStore;
  access: DocdbAccess;
}

/**
 * Service endpoints (docdb.md §12), docdb's response conventions (single JSON bodies end in a
 * line break, §1.3; an empty body where one is required is `invalid_json`, §1.2) and the OpenAPI
 * document with each colon action as its own path.
 */
export function registerServiceRoutes(app: ServiceApp, deps: ServiceRouteDeps): void {
  const { version, databases, documents, access } = deps;

  app.addHook('preValidation', async (request) => {
    if (request.routeOptions.schema?.body && request.body === undefined) throw invalidJson();
  });
  app.addHook('onSend', async (_request, reply, payload) => {
    if (typeof payload !== 'string' || payload.endsWith('\n')) return payload;
    const type = reply.getHeader('content-type');
    return typeof type === 'string' && type.startsWith('application/json') ? `${payload}\n` : payload;
  });

  app.get('/v1', { schema: { tags: ['service'], summary: 'Welcome', response: { 200: Type.Object({ service: Type.String(), version: Type.String() }) } } }, async () => ({ service: 'docdb', version }));
  app.get('/release', { schema: { tags: ['service'], summary: 'The release, as a JSON string', response: { 200: Type.String() } } }, async (_request, reply) =>
    reply.type('application/json').send(JSON.stringify(version)),
  );
  app.get('/doc', { schema: { tags: ['service'], summary: 'A text tree of the registered routes', produces: ['text/plain'] } }, async (_request, reply) =>
    reply.type('text/plain; charset=utf-8').send(app.printRoutes({ commonPrefix: false })),
  );
  app.get(
    '/v1/debug/dbs',
    { schema: { tags: ['service'], summary: "The caller's databases with their collections and document counts", security: [{ gatewayIdentity: [] }] } },
    async (request) => {
      const userId = access.requireUser(request);
      const owned = await databases.listOwnedBy(userId);
      return Promise.all(
        owned.map(async (database) => ({
          id: database.id,
          name: database.name,
          collections: (await documents.listCollections(database.id)).map((collection) => ({ name: collection.name, total: collection.total, indexes: collection.indexes })),
        })),
      );
    },
  );

  app.get('/openapi.json', { schema: { hide: true } }, async () => {
    const document = structuredClone(app.swagger()) as { openapi: string; paths: Record<string, Record<string, unknown>> };
    document.openapi = '3.1.0';
    const databasePath = '/v1/databases/{databaseId}';
    const collectionPath = '/v1/databases/{databaseId}/collections/{collection}';
    const operation = (summary: string, body: unknown, status: number, response: unknown, parameters: string[], tag: string) => ({
      tags: [tag],
      summary,
      parameters: parameters.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
      ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: body } } } } : {}),
      responses: { [status]: { description: 'Success', ...(response ? { content: { 'application/json': { schema: response } } } : {}) } },
    });
    for (const action of DATABASE_ACTIONS) {
      const docs = DATABASE_ACTION_DOCS[action];
      document.paths[`${databasePath}:${action}`] = { post: operation(docs.summary, docs.body, docs.status, docs.response, ['databaseId'], 'databases') };
    }
    for (const action of COLLECTION_ACTIONS) {
      const docs = COLLECTION_ACTION_DOCS[action];
      document.paths[`${collectionPath}:${action}`] = { post: operation(docs.summary, docs.body, docs.status, docs.response, ['databaseId', 'collection'], 'collections') };
    }
    // The generic action route stands for all of the above.
    delete document.paths[collectionPath]?.post;
    delete document.paths[databasePath]?.post;
    return document;
  });
}
