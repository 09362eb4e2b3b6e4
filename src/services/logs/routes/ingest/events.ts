import type { ServiceApp } from '../../../../core/app.ts';
import { LogsErrors } from '../../errors.ts';
import { errorBody, eventsIngested } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { rawBody } from './common.ts';

export const ingestEventsSchema = {
  tags: ['ingest'],
  summary: "Ingest NDJSON or logframe events into the key's logger",
  response: { 200: eventsIngested, 400: errorBody, 401: errorBody, 413: errorBody },
};

/** `POST /v1/ingest/events` (in the raw-body scope): a logger key's events, all or nothing (README: events). */
export function registerIngestEvents(
  scope: ServiceApp,
  { loggers, access, hub, stats, filters, limits }: RouteDeps,
): void {
  scope.post('/v1/ingest/events', { schema: ingestEventsSchema }, async (request) => {
    const loggerId = await access.keyLogger(request);
    const body = rawBody(request);
    // Parsed off the event loop when large; all or nothing (a 4xx stores nothing).
    const { data, count } = await filters.parseEvents(body, request.headers['content-type'], new Date().toISOString());
    const counters = stats.of(loggerId);
    counters.totalIngests++;
    counters.bytesReceived += body.length;
    if (count === 0) return { events: 0, bytes: body.length };
    counters.concurrentIngests++;
    try {
      if ((await loggers.append(loggerId, 'event', data, count, limits.maxBytes)) === null)
        throw LogsErrors.loggerNotFound();
    } finally {
      counters.concurrentIngests--;
    }
    await hub
      .announce(loggerId)
      .catch((error: unknown) => request.log.warn({ err: error }, 'logs append not announced'));
    return { events: count, bytes: body.length };
  });
}
