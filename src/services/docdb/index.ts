import { createServiceApp } from '../../core/app.ts';
import { stringifyJson, type JsonValue } from '../../core/json.ts';
import type { ServiceDefinition } from '../context.ts';
import { DocdbAccess } from './access.ts';
import { DocumentFilters } from './filtering.ts';
import { docdbMigrations } from './migrations.ts';
import { DatabaseRepository, DocumentStore } from './repository/index.ts';
import type { RouteDeps } from './routes/deps.ts';
import { registerRoutes } from './routes/index.ts';

/** Document database (README.md): databases, collections, streamed documents, map and btree indexes. */
export const docdbService: ServiceDefinition = {
  name: 'docdb',
  migrations: docdbMigrations,
  async build({ settings, store, logger, version }) {
    const app = await createServiceApp({
      name: 'docdb',
      domain: settings.domain,
      title: 'Stratus docdb',
      version,
      logger,
      description:
        'Document database: databases with owners and API keys, collections of JSON documents, map and btree indexes, streamed insert/find/patch/remove.',
      exactJson: true,
      // Served by routes/openapi.ts: OpenAPI 3.1 with each colon action as its own path.
      openapiPath: null,
    });
    // Integers above 2^53 stay exact in every body and every answer (README: Responses), not only
    // in documents: bodies are parsed (exactJson) and replies serialized by the exact JSON module.
    app.setReplySerializer((payload) => stringifyJson(payload as JsonValue));
    const databases = new DatabaseRepository(store.sql, store.notifier);
    const access = new DocdbAccess(databases, store.notifier);
    const documents = new DocumentStore(store.sql, store.notifier);
    const filters = new DocumentFilters();
    app.addHook('onClose', async () => {
      access.close();
      databases.close();
      documents.close();
      await filters.close();
    });
    const deps: RouteDeps = { version, databases, documents, access, filters };
    registerRoutes(app, deps);
    return app;
  },
};
