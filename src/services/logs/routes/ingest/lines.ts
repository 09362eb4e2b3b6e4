import type { ServiceApp } from '../../../../core/app.ts';
import { LogsErrors } from '../../errors.ts';
import { errorBody, idParams, ingested, scoped, scopedErrors } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { asLines, rawBody } from './common.ts';

export const ingestLinesSchema = {
  tags: ['ingest'],
  summary: 'Append the body bytes as lines; answers once durably stored',
  description: scoped,
  params: idParams,
  response: { 200: ingested, ...scopedErrors, 413: errorBody },
};

/** `POST /v1/loggers/:id/ingest` (in the raw-body scope): `n` counts the bytes received. */
export function registerIngestLines(scope: ServiceApp, { loggers, access, hub, stats, limits }: RouteDeps): void {
  scope.post('/v1/loggers/:id/ingest', { schema: ingestLinesSchema }, async (request) => {
    const { loggerId } = await access.authorize(request, request.params.id);
    const body = rawBody(request);
    const counters = stats.of(loggerId);
    counters.totalIngests++;
    counters.bytesReceived += body.length;
    if (body.length === 0) return { n: 0 };
    counters.concurrentIngests++;
    try {
      const { data, lines } = await asLines(body);
      if ((await loggers.append(loggerId, 'raw', data, lines, limits.maxBytes)) === null)
        throw LogsErrors.loggerNotFound();
    } finally {
      counters.concurrentIngests--;
    }
    await hub
      .announce(loggerId)
      .catch((error: unknown) => request.log.warn({ err: error }, 'logs append not announced'));
    return { n: body.length };
  });
}
