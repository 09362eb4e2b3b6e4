import type { ServiceApp } from '../../../../core/app.ts';
import { idParams, loggerStats, scoped, scopedErrors } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';

export const loggerStatsSchema = {
  tags: ['loggers'],
  summary: "This instance's counters for the logger since it started, and its retained data",
  description: scoped,
  params: idParams,
  response: { 200: loggerStats, ...scopedErrors },
};

/** `GET /v1/loggers/:id/stats`: counters of this instance (README: stats), `block` from the store. */
export function registerLoggerStats(app: ServiceApp, { loggers, access, stats, limits }: RouteDeps): void {
  app.get('/v1/loggers/:id/stats', { schema: loggerStatsSchema }, async (request) => {
    const { loggerId } = await access.authorize(request, request.params.id);
    const c = stats.of(loggerId);
    const usage = await loggers.usageByKind(loggerId);
    return {
      total_bytes_sent: c.bytesSent,
      total_bytes_received: c.bytesReceived,
      total_bytes_filtered: c.bytesFiltered,
      last_regexps: [...c.lastRegexps],
      concurrent_filters: c.concurrentFilters,
      concurrent_ingests: c.concurrentIngests,
      total_filters: c.totalFilters,
      total_ingests: c.totalIngests,
      block: { bytes: usage.bytes, lines: usage.rawLines, events: usage.events, max_bytes: limits.maxBytes },
    };
  });
}
