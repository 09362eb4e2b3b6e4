import type { ServiceApp } from '../../../../core/app.ts';
import { idParams, loggerStats, scoped, scopedErrors } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

export const loggerStatsSchema = {
  tags: ['loggers'],
  operationId: 'getLoggerStats',
  security: SIGNED_IN,
  summary: "The logger's counters over the platform's live instances, and its retained data",
  description: `${scoped} Each instance counts what it serves from its start and publishes its counters every STATS_FLUSH_INTERVAL seconds; the answer sums the other live instances' published counters with the answering instance's current ones (last_regexps: the 10 most recent over all of them). block is durable.`,
  params: idParams,
  response: { 200: loggerStats, ...scopedErrors },
};

/** `GET /v1/loggers/:id/stats`: counters summed over the live instances (README: stats), `block` from the store. */
export function registerLoggerStats(app: ServiceApp, { loggers, access, stats, limits }: RouteDeps): void {
  app.get('/v1/loggers/:id/stats', { schema: loggerStatsSchema }, async (request) => {
    const { loggerId } = await access.authorize(request, request.params.id);
    const [figures, usage] = await Promise.all([stats.platform(loggerId), loggers.usageByKind(loggerId)]);
    return {
      ...figures,
      block: { bytes: usage.bytes, lines: usage.rawLines, events: usage.events, max_bytes: limits.maxBytes },
    };
  });
}
