// The gateway's traffic over time, from successive reads of `/v0/stats` (gateway README,
// `/v0/stats`): each read gives running totals per host; the rate over an interval is the
// difference of two reads divided by the time between them. Pure: tested in
// test/services/console/stats-window.test.ts.

/** The rows of `/v0/stats` this needs (the client's `StatsRow` has more). */
export interface StatsSample {
  host: string;
  served_requests: number;
  /** Total serving time as a Go duration (`1m2.5s`, `12.25ms`). */
  serving_time: string;
  /** Of the requests, answered with a 5xx status (absent from an older gateway). */
  server_errors?: number;
}

/** The row counting every request, and the row counting requests to a host the gateway does not know. */
export const ALL_HOSTS = '*';
export const NO_ROUTE = '-noroute-';

const UNIT_NS: Record<string, number> = {
  ns: 1,
  us: 1e3,
  µs: 1e3,
  μs: 1e3,
  ms: 1e6,
  s: 1e9,
  m: 60e9,
  h: 3600e9,
};
const DURATION = /^([+-]?)((?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$/;
const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g;

/** Seconds in a Go duration string (`Duration.String()`: `0s`, `1.5µs`, `1m30s`, `2h0m0.5s`); null when it is not one. */
export function goDurationSeconds(text: string): number | null {
  if (text === '0' || text === '0s') return 0;
  const whole = DURATION.exec(text);
  if (!whole) return null;
  let ns = 0;
  for (const [, amount, unit] of text.matchAll(PART)) ns += Number(amount) * (UNIT_NS[unit ?? ''] ?? NaN);
  if (!Number.isFinite(ns)) return null;
  return (whole[1] === '-' ? -ns : ns) / 1e9;
}

interface Totals {
  requests: number;
  /** 5xx answers, or null when the gateway does not count them. */
  errors: number | null;
  /** Serving time in seconds, or null when the row's duration did not parse. */
  serving: number | null;
}

/**
 * A bounded window of rates, one point per read after the first: requests per second for each
 * host seen (and for `*` and `-noroute-`), and the average serving time of the requests of the
 * interval. A rate is null — a gap in the chart, never a made-up value — when it cannot be known:
 * the reads are too far apart (the tab slept), or a total went down (an instance left the sum,
 * gateway README `/v0/stats`), or, for the latency, no request finished in the interval.
 */
export class StatsWindow {
  /** The time of each point, in seconds since the epoch (uPlot's time scale). */
  readonly times: number[] = [];
  /** Hosts in the order they first appeared, `*` and `-noroute-` first. */
  readonly hosts: string[] = [ALL_HOSTS, NO_ROUTE];
  private readonly rates = new Map<string, (number | null)[]>([
    [ALL_HOSTS, []],
    [NO_ROUTE, []],
  ]);
  /** Average serving time of the interval's requests, in milliseconds. */
  readonly latencyMs: (number | null)[] = [];
  /** Requests per second answered with a 5xx status, over every host. */
  readonly serverErrors: (number | null)[] = [];
  private last: { at: number; totals: Map<string, Totals> } | null = null;

  /**
   * @param capacity most points kept (the oldest go first)
   * @param maxGapMs reads further apart than this give no rate (a gap)
   */
  constructor(
    readonly capacity: number,
    readonly maxGapMs: number,
  ) {}

  /** Adds a read made at `atMs` (milliseconds since the epoch). */
  push(atMs: number, rows: readonly StatsSample[]): void {
    const totals = new Map<string, Totals>();
    for (const row of rows) {
      totals.set(row.host, {
        requests: row.served_requests,
        errors: typeof row.server_errors === 'number' ? row.server_errors : null,
        serving: goDurationSeconds(row.serving_time),
      });
      if (!this.rates.has(row.host)) {
        this.hosts.push(row.host);
        // A host new to the window has no rate at the points before it.
        this.rates.set(
          row.host,
          this.times.map(() => null),
        );
      }
    }
    const previous = this.last;
    this.last = { at: atMs, totals };
    if (!previous || atMs <= previous.at) return;
    const seconds = (atMs - previous.at) / 1000;
    const known = atMs - previous.at <= this.maxGapMs;
    this.times.push(atMs / 1000);
    for (const host of this.hosts) {
      const now = totals.get(host);
      // Rows list hosts with requests only: a host missing before had none then.
      const before = previous.totals.get(host) ?? { requests: 0, errors: 0, serving: 0 };
      let rate: number | null = null;
      if (known && now && now.requests >= before.requests) rate = (now.requests - before.requests) / seconds;
      this.rates.get(host)!.push(rate);
    }
    const all = totals.get(ALL_HOSTS);
    const allBefore = previous.totals.get(ALL_HOSTS);
    let latency: number | null = null;
    if (known && all && allBefore && all.serving !== null && allBefore.serving !== null) {
      const requests = all.requests - allBefore.requests;
      const serving = all.serving - allBefore.serving;
      if (requests > 0 && serving >= 0) latency = (serving / requests) * 1000;
    }
    this.latencyMs.push(latency);
    let errors: number | null = null;
    if (known && all?.errors != null && allBefore?.errors != null && all.errors >= allBefore.errors)
      errors = (all.errors - allBefore.errors) / seconds;
    this.serverErrors.push(errors);
    if (this.times.length > this.capacity) {
      const drop = this.times.length - this.capacity;
      this.times.splice(0, drop);
      this.latencyMs.splice(0, drop);
      this.serverErrors.splice(0, drop);
      for (const values of this.rates.values()) values.splice(0, drop);
    }
  }

  /** Requests per second of `host` at each point (null where unknown). */
  rate(host: string): (number | null)[] {
    return this.rates.get(host) ?? this.times.map(() => null);
  }

  /** The newest rate of `host`, or null. */
  latest(host: string): number | null {
    const values = this.rates.get(host);
    return values && values.length > 0 ? (values[values.length - 1] ?? null) : null;
  }
}
