import type { ServiceApp } from '../../../../core/app.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

export const debugDatabasesSchema = {
  tags: ['service'],
  summary: "The caller's databases with their collections and document counts",
  operationId: 'listDebugDatabases',
  security: SIGNED_IN,
};

/** `GET /v1/debug/dbs`: identity required; the caller's databases with their collections (name, total, indexes). */
export function registerDebugDatabases(app: ServiceApp, { databases, documents, access }: RouteDeps): void {
  app.get('/v1/debug/dbs', { schema: debugDatabasesSchema }, async (request) => {
    const userId = access.requireUser(request);
    const owned = await databases.listOwnedBy(userId);
    return Promise.all(
      owned.map(async (database) => ({
        id: database.id,
        name: database.name,
        collections: (await documents.listCollections(database.id)).map((collection) => ({
          name: collection.name,
          total: collection.total,
          indexes: collection.indexes,
        })),
      })),
    );
  });
}
