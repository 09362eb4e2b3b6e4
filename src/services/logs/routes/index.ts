import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { ServiceApp } from '../../../core/app.ts';
import type { RouteDeps } from './deps.ts';
import { registerEventStream } from './streams/events.ts';
import { registerFilterStream } from './streams/filter.ts';
import { registerIngestEvents } from './ingest/events.ts';
import { registerIngestLines } from './ingest/lines.ts';
import { registerCreateKey } from './keys/create.ts';
import { registerDeleteKey } from './keys/delete.ts';
import { registerCreateLogger } from './loggers/create.ts';
import { registerDeleteLogger } from './loggers/delete.ts';
import { registerGetLogger } from './loggers/get.ts';
import { registerListLoggers } from './loggers/list.ts';
import { registerLoggerStats } from './loggers/stats.ts';
import { registerAddOwner } from './owners/add.ts';
import { registerRemoveOwner } from './owners/remove.ts';

/** Every route of the logs service (README), in the order the OpenAPI document lists them. */
export function registerRoutes(app: ServiceApp, deps: RouteDeps): void {
  // Loggers: list, create, get, delete, stats.
  registerListLoggers(app, deps);
  registerCreateLogger(app, deps);
  registerGetLogger(app, deps);
  registerDeleteLogger(app, deps);
  registerLoggerStats(app, deps);

  // Keys and owners of a logger.
  registerCreateKey(app, deps);
  registerDeleteKey(app, deps);
  registerAddOwner(app, deps);
  registerRemoveOwner(app, deps);

  // Streams: raw lines, then events.
  registerFilterStream(app, deps);
  registerEventStream(app, deps);

  // Raw and events bodies are bytes: parsed in this scope, not by the app's JSON parser.
  app.register(async (plain) => {
    const scope = plain.withTypeProvider<TypeBoxTypeProvider>();
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser(
      '*',
      { parseAs: 'buffer', bodyLimit: deps.limits.maxIngestBytes },
      (_request, body, done) => done(null, body),
    );
    registerIngestLines(scope, deps);
    registerIngestEvents(scope, deps);
  });
}
