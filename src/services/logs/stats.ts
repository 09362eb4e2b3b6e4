/** Patterns remembered per logger (README: stats). */
const LAST_REGEXPS = 10;

/** One logger's counters on this instance since it started (README: stats; the decisions on stats). */
export class LoggerCounters {
  bytesSent = 0;
  bytesReceived = 0;
  bytesFiltered = 0;
  lastRegexps: string[] = [];
  concurrentFilters = 0;
  concurrentIngests = 0;
  totalFilters = 0;
  totalIngests = 0;

  openStream(patterns: string[]): void {
    this.concurrentFilters++;
    this.totalFilters++;
    if (patterns.length > 0) {
      this.lastRegexps.push(patterns.join(' AND '));
      if (this.lastRegexps.length > LAST_REGEXPS) this.lastRegexps.shift();
    }
  }

  closeStream(): void {
    this.concurrentFilters--;
  }
}

export class LogStats {
  private readonly loggers = new Map<string, LoggerCounters>();

  of(loggerId: string): LoggerCounters {
    let counters = this.loggers.get(loggerId);
    if (!counters) this.loggers.set(loggerId, (counters = new LoggerCounters()));
    return counters;
  }

  forget(loggerId: string): void {
    this.loggers.delete(loggerId);
  }
}
