import type { PlatformMetrics } from '../../../metrics/index.ts';
import type { LogsAccess } from '../access.ts';
import type { LogFilters } from '../filters.ts';
import type { LoggerRepository } from '../repository.ts';
import type { LogStats } from '../stats.ts';
import type { FollowHub } from '../streams.ts';

export interface LogsLimits {
  /** Retention bound per logger, raw lines and events together. */
  maxBytes: number;
  /** Largest ingest body (raw or events); above → 413. */
  maxIngestBytes: number;
}

/** What every route of the logs service is given by index.ts. */
export interface RouteDeps {
  loggers: LoggerRepository;
  access: LogsAccess;
  hub: FollowHub;
  stats: LogStats;
  filters: LogFilters;
  limits: LogsLimits;
  /** Ingested and streamed bytes, open streams (README.md: Metrics); absent when built alone. */
  metrics?: LogsMetrics;
}

/** What the logging service counts into the instance's metrics. */
export type LogsMetrics = Pick<PlatformMetrics, 'logsIngestedBytes' | 'logsStreamedBytes' | 'logsStream'>;
