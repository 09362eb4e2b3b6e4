import type { CounterSource, PlatformInstance } from '../../instances/index.ts';

/** Patterns remembered per logger (README: stats). */
const LAST_REGEXPS = 10;

/** A stream's patterns and when it opened (microseconds since the epoch, increasing per instance). */
interface RecentRegexp {
  at: number;
  pattern: string;
}

/** One logger's figures as the stats route answers them, without `block` (README: stats). */
export interface LoggerFigures {
  total_bytes_sent: number;
  total_bytes_received: number;
  total_bytes_filtered: number;
  last_regexps: string[];
  concurrent_filters: number;
  concurrent_ingests: number;
  total_filters: number;
  total_ingests: number;
}

/** What an instance publishes per logger: its figures, the patterns with their times. */
type PublishedFigures = Omit<LoggerFigures, 'last_regexps'> & { last_regexps: RecentRegexp[] };

let lastAt = 0;
const stamp = () => (lastAt = Math.max(Math.round((performance.timeOrigin + performance.now()) * 1000), lastAt + 1));

/** One logger's counters on this instance since it started (README: stats). */
export class LoggerCounters {
  bytesSent = 0;
  bytesReceived = 0;
  bytesFiltered = 0;
  lastRegexps: RecentRegexp[] = [];
  concurrentFilters = 0;
  concurrentIngests = 0;
  totalFilters = 0;
  totalIngests = 0;
  /** The figures last handed to the instance registry, encoded. */
  published = '';

  openStream(patterns: string[]): void {
    this.concurrentFilters++;
    this.totalFilters++;
    if (patterns.length > 0) {
      this.lastRegexps.push({ at: stamp(), pattern: patterns.join(' AND ') });
      if (this.lastRegexps.length > LAST_REGEXPS) this.lastRegexps.shift();
    }
  }

  closeStream(): void {
    this.concurrentFilters--;
  }

  figures(): PublishedFigures {
    return {
      total_bytes_sent: this.bytesSent,
      total_bytes_received: this.bytesReceived,
      total_bytes_filtered: this.bytesFiltered,
      last_regexps: [...this.lastRegexps],
      concurrent_filters: this.concurrentFilters,
      concurrent_ingests: this.concurrentIngests,
      total_filters: this.totalFilters,
      total_ingests: this.totalIngests,
    };
  }
}

const SUMMED = [
  'total_bytes_sent',
  'total_bytes_received',
  'total_bytes_filtered',
  'concurrent_filters',
  'concurrent_ingests',
  'total_filters',
  'total_ingests',
] as const;

const figure = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) ? value : 0);

/**
 * Per-logger counters (README: stats). Each instance counts what it serves from its start and
 * publishes the figures through the instance registry; a read sums the live instances' figures
 * with this instance's current ones. Without a registry (the service built alone, in tests) the
 * figures are this instance's only.
 */
export class LogStats implements CounterSource {
  readonly owner = 'logs';
  private readonly loggers = new Map<string, LoggerCounters>();

  constructor(private readonly instance: PlatformInstance | null = null) {
    instance?.publish(this);
  }

  of(loggerId: string): LoggerCounters {
    let counters = this.loggers.get(loggerId);
    if (!counters) this.loggers.set(loggerId, (counters = new LoggerCounters()));
    return counters;
  }

  /** Drops the logger's counters here and what every instance published for it. */
  async forget(loggerId: string): Promise<void> {
    this.loggers.delete(loggerId);
    await this.instance?.forget(this.owner, loggerId);
  }

  changes(full: boolean): [string, PublishedFigures][] {
    const changed: [string, PublishedFigures][] = [];
    for (const [loggerId, counters] of this.loggers) {
      const figures = counters.figures();
      const encoded = JSON.stringify(figures);
      if (!full && encoded === counters.published) continue;
      counters.published = encoded;
      changed.push([loggerId, figures]);
    }
    return changed;
  }

  /** The logger's figures over the live instances of the platform (README: stats). */
  async platform(loggerId: string): Promise<LoggerFigures> {
    const own = this.loggers.get(loggerId)?.figures();
    const all: Partial<PublishedFigures>[] = own ? [own] : [];
    if (this.instance)
      for (const { value } of await this.instance.othersCounters(this.owner, loggerId))
        all.push((value ?? {}) as Partial<PublishedFigures>);
    const sum = Object.fromEntries(
      SUMMED.map((field) => [field, all.reduce((n, figures) => n + figure(figures[field]), 0)]),
    ) as Record<(typeof SUMMED)[number], number>;
    const regexps = all
      .flatMap((figures) => (Array.isArray(figures.last_regexps) ? figures.last_regexps : []))
      .filter((r): r is RecentRegexp => typeof r?.pattern === 'string' && typeof r.at === 'number')
      .sort((a, b) => a.at - b.at);
    return { ...sum, last_regexps: regexps.slice(-LAST_REGEXPS).map((r) => r.pattern) };
  }
}
