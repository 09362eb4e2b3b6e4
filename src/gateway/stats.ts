import { formatDuration } from '../core/duration.ts';
import { rfc3339 } from '../core/ids.ts';

interface Counter {
  requests: number;
  servingNs: number;
}

export interface StatsRow {
  host: string;
  served_requests: number;
  serving_time: string;
  latency_avg: string;
  uptime: string;
  start_timestamp: string;
}

export const ALL_HOSTS = '*';
export const NO_ROUTE = '-noroute-';

/** Traffic counters of this gateway instance (README: `/v0/stats`), from its start. */
export class GatewayStats {
  private readonly started = Date.now();
  private readonly all: Counter = { requests: 0, servingNs: 0 };
  private readonly noRoute: Counter = { requests: 0, servingNs: 0 };
  /** Hosts in order of their first request (Map keeps insertion order). */
  private readonly hosts = new Map<string, Counter>();

  /** Records a completed request; `host` null means it matched no route. */
  record(host: string | null, servingNs: number): void {
    this.all.requests++;
    this.all.servingNs += servingNs;
    let counter = this.noRoute;
    if (host !== null) {
      counter = this.hosts.get(host) ?? { requests: 0, servingNs: 0 };
      if (counter.requests === 0) this.hosts.set(host, counter);
    }
    counter.requests++;
    counter.servingNs += servingNs;
  }

  rows(now = Date.now()): StatsRow[] {
    const uptime = formatDuration((now - this.started) * 1e6);
    const start = rfc3339(new Date(this.started));
    const row = (host: string, c: Counter): StatsRow => ({
      host,
      served_requests: c.requests,
      serving_time: formatDuration(c.servingNs),
      latency_avg: formatDuration(c.requests === 0 ? 0 : c.servingNs / c.requests),
      uptime,
      start_timestamp: start,
    });
    return [row(ALL_HOSTS, this.all), row(NO_ROUTE, this.noRoute), ...[...this.hosts].map(([host, c]) => row(host, c))];
  }
}
