import type { ServiceApp } from '../../../../core/app.ts';
import type { RouteDeps } from '../deps.ts';
import { serveStream, streamSchema } from './common.ts';

export const eventStreamSchema = streamSchema(
  'streamEvents',
  'application/x-ndjson',
  'Stream matching events (NDJSON); regex is tested on the message',
);

/** `GET /v1/loggers/:id/events`: the logger's events whose message matches every `regex`, as NDJSON. */
export function registerEventStream(app: ServiceApp, deps: RouteDeps): void {
  app.get('/v1/loggers/:id/events', { schema: eventStreamSchema }, async (request, reply) =>
    serveStream(request, reply, { id: request.params.id, kind: 'event', query: request.query }, deps),
  );
}
