import { formatDuration } from '../core/duration.ts';
import { rfc3339 } from '../core/ids.ts';
import type { CounterSource, InstanceRecord, PlatformInstance } from '../instances/index.ts';

interface Counter {
  requests: number;
  servingNs: number;
  /** Requests answered with a 5xx status (the platform failed them). */
  errors: number;
  /** When the row's first request finished: microseconds since the epoch, strictly increasing per instance. */
  first: number;
  /** `requests` when last handed to the registry. */
  published: number;
}

/** A row's figures as an instance publishes them through the registry. */
interface PublishedFigures {
  requests: number;
  serving_ns: number;
  errors?: number;
  first: number;
}

export interface StatsRow {
  host: string;
  served_requests: number;
  /** Of them, answered with a 5xx status (beyond the reference's fields: the console's error rate). */
  server_errors: number;
  serving_time: string;
  latency_avg: string;
  uptime: string;
  start_timestamp: string;
}

/** A live instance in the per-instance breakdown (`GET /v0/instances`). */
export interface InstanceView {
  id: string;
  host: string;
  pid: number;
  version: string;
  services: string[];
  started_at: string;
  last_seen: string;
  /** The instance's `*` count: as last published, or now for the answering instance. */
  served_requests: number;
  answering: boolean;
}

export const ALL_HOSTS = '*';
export const NO_ROUTE = '-noroute-';

const figure = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) ? value : 0);

/**
 * Traffic counters (README: `/v0/stats`). Each instance counts its own requests from its start and
 * publishes the totals through the instance registry; a read sums the live instances' published
 * figures with this instance's current ones. Without a registry (a gateway built alone, in tests)
 * the figures are this instance's only.
 */
export class GatewayStats implements CounterSource {
  readonly owner = 'gateway';
  private readonly started: number;
  private readonly all: Counter = { requests: 0, servingNs: 0, errors: 0, first: 0, published: 0 };
  private readonly noRoute: Counter = { requests: 0, servingNs: 0, errors: 0, first: 0, published: 0 };
  /** Hosts in order of their first request (Map keeps insertion order). */
  private readonly hosts = new Map<string, Counter>();
  private lastFirst = 0;

  constructor(private readonly instance: PlatformInstance | null = null) {
    this.started = instance?.startedAt ?? Date.now();
    instance?.publish(this);
  }

  /** Records a completed request; `host` null means it matched no route. */
  record(host: string | null, servingNs: number, status = 200): void {
    const error = status >= 500 ? 1 : 0;
    this.all.requests++;
    this.all.servingNs += servingNs;
    this.all.errors += error;
    let counter = this.noRoute;
    if (host !== null) {
      counter = this.hosts.get(host) ?? { requests: 0, servingNs: 0, errors: 0, first: 0, published: 0 };
      if (counter.requests === 0) {
        counter.first = this.lastFirst = Math.max(
          Math.round((performance.timeOrigin + performance.now()) * 1000),
          this.lastFirst + 1,
        );
        this.hosts.set(host, counter);
      }
    }
    counter.requests++;
    counter.servingNs += servingNs;
    counter.errors += error;
  }

  changes(full: boolean): [string, PublishedFigures][] {
    const changed: [string, PublishedFigures][] = [];
    for (const [name, c] of this.counters()) {
      if (!full && c.requests === c.published) continue;
      c.published = c.requests;
      changed.push([name, { requests: c.requests, serving_ns: c.servingNs, errors: c.errors, first: c.first }]);
    }
    return changed;
  }

  /** This instance's rows alone. */
  rows(now = Date.now()): StatsRow[] {
    return format(new Map(this.counters()), this.started, now);
  }

  /** The platform's rows: the sum over the live instances (README: `/v0/stats`). */
  async platformRows(now = Date.now()): Promise<StatsRow[]> {
    if (!this.instance) return this.rows(now);
    const [others, live] = await Promise.all([this.instance.othersCounters(this.owner), this.instance.live()]);
    const liveIds = new Set(live.map((i) => i.id));
    const sums = new Map<string, Pick<Counter, 'requests' | 'servingNs' | 'errors' | 'first'>>();
    for (const [name, c] of this.counters())
      sums.set(name, { requests: c.requests, servingNs: c.servingNs, errors: c.errors, first: c.first });
    for (const { instance, name, value } of others) {
      if (!liveIds.has(instance)) continue;
      const published = (value ?? {}) as Partial<PublishedFigures>;
      const sum = sums.get(name);
      const first = figure(published.first);
      if (!sum)
        sums.set(name, {
          requests: figure(published.requests),
          servingNs: figure(published.serving_ns),
          errors: figure(published.errors),
          first,
        });
      else {
        sum.requests += figure(published.requests);
        sum.servingNs += figure(published.serving_ns);
        sum.errors += figure(published.errors);
        sum.first = Math.min(sum.first, first);
      }
    }
    return format(sums, Math.min(...live.map((i) => i.startedAt)), now);
  }

  /** The live instances, oldest first, with each one's `*` count (README: `/v0/instances`). */
  async instances(): Promise<InstanceView[]> {
    if (!this.instance) return [];
    const [live, totals] = await Promise.all([
      this.instance.live(),
      this.instance.othersCounters(this.owner, ALL_HOSTS),
    ]);
    const served = new Map(totals.map((t) => [t.instance, figure((t.value as Partial<PublishedFigures>).requests)]));
    served.set(this.instance.id, this.all.requests);
    return live.map((i: InstanceRecord) => ({
      id: i.id,
      host: i.host,
      pid: i.pid,
      version: i.version,
      services: [...i.services],
      started_at: rfc3339(new Date(i.startedAt)),
      last_seen: rfc3339(new Date(i.lastSeen)),
      served_requests: served.get(i.id) ?? 0,
      answering: i.id === this.instance?.id,
    }));
  }

  private *counters(): Iterable<[string, Counter]> {
    yield [ALL_HOSTS, this.all];
    yield [NO_ROUTE, this.noRoute];
    yield* this.hosts;
  }
}

/** The reference rows: `*`, `-noroute-`, then the hosts in order of first request. */
function format(
  counters: ReadonlyMap<string, Pick<Counter, 'requests' | 'servingNs' | 'errors' | 'first'>>,
  started: number,
  now: number,
): StatsRow[] {
  const uptime = formatDuration(Math.max(0, now - started) * 1e6);
  const start = rfc3339(new Date(started));
  const row = (host: string, c: Pick<Counter, 'requests' | 'servingNs' | 'errors'> | undefined): StatsRow => ({
    host,
    served_requests: c?.requests ?? 0,
    server_errors: c?.errors ?? 0,
    serving_time: formatDuration(c?.servingNs ?? 0),
    latency_avg: formatDuration(!c || c.requests === 0 ? 0 : c.servingNs / c.requests),
    uptime,
    start_timestamp: start,
  });
  const hosts = [...counters]
    .filter(([name, c]) => name !== ALL_HOSTS && name !== NO_ROUTE && c.requests > 0)
    .sort(([, a], [, b]) => a.first - b.first);
  return [
    row(ALL_HOSTS, counters.get(ALL_HOSTS)),
    row(NO_ROUTE, counters.get(NO_ROUTE)),
    ...hosts.map(([host, c]) => row(host, c)),
  ];
}
