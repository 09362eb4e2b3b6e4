import type { ServiceApp } from '../../../../core/app.ts';
import { errorBody, eventsIngested } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { ingest, rawBody } from './common.ts';
import { API_KEY_PAIR, type RouteDocs } from '../../../../core/openapi.ts';

export const ingestEventsSchema = {
  tags: ['ingest'],
  operationId: 'ingestEvents',
  security: API_KEY_PAIR,
  summary: "Ingest NDJSON or logframe events into the key's logger",
  openapi: {
    rawBody: {
      mediaTypes: ['application/x-ndjson', 'application/octet-stream'],
      description:
        'Events: NDJSON (one JSON object per line) or logframe; told apart by the first byte, or forced to NDJSON by Content-Type: application/x-ndjson',
    },
  } satisfies RouteDocs,
  response: { 200: eventsIngested, 400: errorBody, 401: errorBody, 413: errorBody },
};

/** `POST /v1/ingest/events` (in the raw-body scope): a logger key's events, all or nothing (README: events). */
export function registerIngestEvents(scope: ServiceApp, deps: RouteDeps): void {
  const { access, filters } = deps;
  scope.post('/v1/ingest/events', { schema: ingestEventsSchema }, async (request) => {
    const loggerId = await access.keyLogger(request);
    const body = rawBody(request);
    // Parsed off the event loop when large; all or nothing (a 4xx stores nothing).
    const { data, count } = await filters.parseEvents(body, request.headers['content-type'], new Date().toISOString());
    await ingest(request, deps, loggerId, 'event', body.length, count === 0 ? null : async () => ({ data, count }));
    return { events: count, bytes: body.length };
  });
}
