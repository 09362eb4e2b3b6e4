import type { ServiceApp } from '../../../core/app.ts';
import { registerCollectionActions } from './collections/actions.ts';
import { registerCreateCollection } from './collections/create.ts';
import { registerGetCollection } from './collections/get.ts';
import { registerListCollections } from './collections/list.ts';
import { registerConventions } from './conventions.ts';
import { registerDatabaseActions } from './databases/actions.ts';
import { registerCreateDatabase } from './databases/create.ts';
import { registerDeleteDatabase } from './databases/delete.ts';
import { registerGetDatabase } from './databases/get.ts';
import { registerListDatabases } from './databases/list.ts';
import { registerRenameDatabase } from './databases/rename.ts';
import type { RouteDeps } from './deps.ts';
import { registerGetDocument } from './documents/get.ts';
import { registerOpenApi } from './openapi.ts';
import { registerDebugDatabases } from './service/debug.ts';
import { registerRouteTree } from './service/doc.ts';
import { registerRelease } from './service/release.ts';
import { registerWelcome } from './service/welcome.ts';

/** Every route of docdb (README), in the order the OpenAPI document lists them. */
export function registerRoutes(app: ServiceApp, deps: RouteDeps): void {
  // Conventions first: the hooks hold for every route after them.
  registerConventions(app);

  // Service endpoints and the OpenAPI document.
  registerWelcome(app, deps);
  registerRelease(app, deps);
  registerRouteTree(app);
  registerDebugDatabases(app, deps);
  registerOpenApi(app);

  // Databases: list and create (identity), get, rename and delete, then the colon actions (API keys, owners).
  registerListDatabases(app, deps);
  registerCreateDatabase(app, deps);
  registerGetDatabase(app, deps);
  registerRenameDatabase(app, deps);
  registerDeleteDatabase(app, deps);
  registerDatabaseActions(app, deps);

  // Collections: list, create, get; a document by id; then the colon actions of a collection
  // (collection, index and document actions), in a context of their own.
  registerListCollections(app, deps);
  registerCreateCollection(app, deps);
  registerGetCollection(app, deps);
  registerGetDocument(app, deps);
  registerCollectionActions(app, deps);
}
