import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { Buckets, registerCollected, type Sample } from './collected.ts';

/** Which listener a request came in on. */
export type PortName = 'public' | 'internal';

/** How a public-port request came out of authentication, as counted: the credential's kind, never the credential. */
export type AuthKind =
  'api_key' | 'basic' | 'bearer_session' | 'bearer_jwt' | 'cookie' | 'anonymous' | 'rejected' | 'limited';

const AUTH_KINDS: readonly AuthKind[] = [
  'api_key',
  'basic',
  'bearer_session',
  'bearer_jwt',
  'cookie',
  'anonymous',
  'rejected',
  'limited',
];

/** One finished request as the gateway counts it (README.md: Metrics). */
export interface RequestSample {
  port: PortName;
  /** A service name, `gateway`, or `none` when no route matched. */
  service: string;
  /** The matched route's pattern (`/v1/buckets/:bucket/files/*`), `other` when none. */
  route: string;
  method: string | undefined;
  /** The response status; 499 when the client left before it was sent. */
  status: number;
  seconds: number;
  bytesIn: number;
  bytesOut: number;
}

/** Scheduler figures per scheduler, for the capped per-scheduler series. */
export interface SchedulerTaskCounts {
  scheduler: string;
  scheduled: number;
  inflight: number;
  dead: number;
}

/** Request latency buckets (seconds): a cached read takes well under a millisecond, streams run for minutes. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const COMMIT_SECONDS_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/** Methods counted by name; any other (Node accepts ~30) is `other`, the last. */
const METHOD_NAMES = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'other'] as const;
const OTHER_METHOD = METHOD_NAMES.length - 1;
const METHOD_INDEX = new Map<string, number>(METHOD_NAMES.slice(0, OTHER_METHOD).map((name, i) => [name, i]));

/**
 * Routes kept at most: route patterns are the apps' own (a few hundred), so this is only a guard;
 * past it a new route counts as `other`.
 */
const MAX_ROUTES = 2000;

/** Per-scheduler series: the largest this many schedulers by tasks, the rest summed under OTHER_SCHEDULERS. */
export const SCHEDULER_SERIES_CAP = 50;
/** No scheduler id can contain `~` (ids are `A–Z a–z 0–9 . _ -`), so the bucket never takes a real one's name. */
export const OTHER_SCHEDULERS = '~other';

/** A scrape waits this long for scrape-time probes; one still running keeps its last values. */
const PROBE_WAIT_MS = 2_000;

interface RequestSeries {
  readonly labels: Readonly<{ port: string; service: string; route: string; method: string; code: string }>;
  count: number;
  bytesIn: number;
  bytesOut: number;
}

/**
 * One service's route: its request series by port, method and status (a number, see
 * requestFinished) and its latency per method. Looked up by the service's and the route's own
 * strings, whose hashes V8 keeps: a key joined per request would cost a new string each time.
 */
interface RouteSeries {
  readonly service: string;
  readonly route: string;
  readonly byCode: Map<number, RequestSeries>;
  readonly latency: (Buckets | undefined)[];
}

/** A scrape-time probe (see `probe`). */
interface Probe {
  readonly name: string;
  readonly run: () => void | Promise<void>;
  readonly ttlMs: number;
  last: number;
  running: Promise<void> | undefined;
}

/**
 * One platform instance's metrics (README.md: Metrics): its own prom-client registry (several
 * platforms may run in one process, as the tests do), the families every part of the instance
 * counts into, and the probes that compute gauges when the registry is read. Parts built without a
 * platform (a service alone, in tests) get none and count nothing.
 */
export class PlatformMetrics {
  readonly registry = new Registry();

  // ---- the request path: plain objects, read at scrape time (collected.ts) ----
  private readonly routes = new Map<string, Map<string, RouteSeries>>();
  private routeCount = 0;
  private readonly inFlight: Record<PortName, number> = { public: 0, internal: 0 };
  private readonly authCounts = Object.fromEntries(AUTH_KINDS.map((kind) => [kind, 0])) as Record<AuthKind, number>;

  private readonly probes: Probe[] = [];
  private readonly probeErrors: Counter;

  private readonly commitBatch: Histogram;
  private readonly commitSeconds: Histogram;
  private readonly sqlPoolConnections: Gauge;
  private readonly sqlPoolWaiting: Gauge;
  private readonly notifierLag: Gauge;
  private readonly notifierConnected: Gauge;
  private readonly notifierResyncs: Counter;

  private readonly schedulerTasks: Gauge;
  private readonly schedulers: Gauge;
  private readonly deliveries: Counter;

  private readonly lambdaInvocations: Counter;
  private readonly lambdaDuration: Histogram;
  private readonly lambdaIsolates: Gauge;
  private readonly lambdaWaiting: Gauge;

  private readonly logsIngested: Counter;
  private readonly logsStreamed: Counter;
  private readonly logsFollowers: Gauge;
  private readonly logsStreams: Gauge;

  private readonly filesBytes: Counter;
  private readonly registryBytes: Counter;

  private readonly kvSeq: Gauge;
  private readonly kvOperations: Counter;
  private readonly kvReplication: Counter;
  private readonly kvChildren: Gauge;
  private readonly kvParentConnected: Gauge;
  private readonly kvReplicaLag: Gauge;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    // Process metrics under their usual names (process_…, nodejs_…), which dashboards expect.
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });

    registerCollected(
      this.registry,
      'stratus_http_requests_total',
      'Requests answered, by port, service, route pattern, method and status code (499: the client left first).',
      'counter',
      () => [...this.requestSeries()].map((s) => ({ labels: s.labels, value: s.count })),
    );
    registerCollected(
      this.registry,
      'stratus_http_request_duration_seconds',
      'Time from a request’s arrival to the end of its response, by service, route pattern and method.',
      'histogram',
      () =>
        [...this.routeSeries()].flatMap((r) =>
          r.latency.flatMap((buckets, m) =>
            buckets
              ? buckets.samples('stratus_http_request_duration_seconds', {
                  service: r.service,
                  route: r.route,
                  method: METHOD_NAMES[m]!,
                })
              : [],
          ),
        ),
    );
    registerCollected(
      this.registry,
      'stratus_http_request_bytes_total',
      'Bytes read from clients for requests (request line, headers and body), by port and service.',
      'counter',
      () => this.bytesByService('bytesIn'),
    );
    registerCollected(
      this.registry,
      'stratus_http_response_bytes_total',
      'Bytes written to clients for responses (status line, headers and body), by port and service.',
      'counter',
      () => this.bytesByService('bytesOut'),
    );
    registerCollected(
      this.registry,
      'stratus_http_requests_in_flight',
      'Requests received and not yet answered, by port.',
      'gauge',
      () => (['public', 'internal'] as const).map((port) => ({ labels: { port }, value: this.inFlight[port] })),
    );
    registerCollected(
      this.registry,
      'stratus_gateway_auth_total',
      'Public-port requests by how authentication came out: the credential kind that authenticated, anonymous, rejected (401) or limited (429).',
      'counter',
      () => AUTH_KINDS.map((outcome) => ({ labels: { outcome }, value: this.authCounts[outcome] })),
    );

    this.probeErrors = new Counter({
      name: 'stratus_metrics_probe_errors_total',
      help: 'Scrape-time probes that failed (their gauges keep the last values), by probe.',
      labelNames: ['probe'],
      registers,
    });

    this.commitBatch = new Histogram({
      name: 'stratus_sql_commit_batch_size',
      help: 'Writes that shared one commit, by group: sqlite_transaction (the SQLite group commit), postgres_transaction (one write), and the batched writers (scheduler_enqueue, scheduler_reserve and scheduler_acknowledge on PostgreSQL, files_commit, blob_small_put).',
      labelNames: ['group'],
      buckets: BATCH_BUCKETS,
      registers,
    });
    this.commitSeconds = new Histogram({
      name: 'stratus_sql_commit_duration_seconds',
      help: 'Time to write and commit one batch, by group (see stratus_sql_commit_batch_size).',
      labelNames: ['group'],
      buckets: COMMIT_SECONDS_BUCKETS,
      registers,
    });
    this.sqlPoolConnections = new Gauge({
      name: 'stratus_sql_pool_connections',
      help: 'PostgreSQL pool connections by state (idle, busy) and its maximum (max).',
      labelNames: ['state'],
      registers,
    });
    this.sqlPoolWaiting = new Gauge({
      name: 'stratus_sql_pool_waiting',
      help: 'Queries waiting for a PostgreSQL pool connection.',
      registers,
    });
    this.notifierLag = new Gauge({
      name: 'stratus_notifier_lag_seconds',
      help: 'How long a notification sent now takes to reach this instance: the round trip of a notifier fence, measured at scrape time.',
      registers,
    });
    this.notifierConnected = new Gauge({
      name: 'stratus_notifier_connected',
      help: '1 while the notifier delivers (its fence answers), 0 while it reconnects.',
      registers,
    });
    this.notifierResyncs = new Counter({
      name: 'stratus_notifier_resyncs_total',
      help: 'Times the notifier reconnected and told every cache to reload (notifications may have been missed).',
      registers,
    });

    this.schedulerTasks = new Gauge({
      name: 'stratus_scheduler_tasks',
      help: `Tasks by scheduler and state (scheduled, inflight, dead): the ${SCHEDULER_SERIES_CAP} largest schedulers by tasks, the rest summed under scheduler="${OTHER_SCHEDULERS}".`,
      labelNames: ['scheduler', 'state'],
      registers,
    });
    this.schedulers = new Gauge({
      name: 'stratus_scheduler_schedulers',
      help: 'Schedulers on the platform.',
      registers,
    });
    this.deliveries = new Counter({
      name: 'stratus_scheduler_deliveries_total',
      help: 'Platform deliveries of due tasks by target kind (lambda, webhook) and outcome (succeeded, failed: retried later, dead: moved to the dead list).',
      labelNames: ['target', 'outcome'],
      registers,
    });

    this.lambdaInvocations = new Counter({
      name: 'stratus_lambda_invocations_total',
      help: 'Lambda runs by trigger (invoke, http, run, mux, project, cron, task) and outcome (ok, error, timeout, memory, response_too_large).',
      labelNames: ['trigger', 'outcome'],
      registers,
    });
    this.lambdaDuration = new Histogram({
      name: 'stratus_lambda_invocation_duration_seconds',
      help: 'Lambda run time, waiting for an isolate included, by trigger.',
      labelNames: ['trigger'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.lambdaIsolates = new Gauge({
      name: 'stratus_lambda_isolates',
      help: 'Lambda isolates of this instance by state: idle (the warm pool) and busy.',
      labelNames: ['state'],
      registers,
    });
    this.lambdaWaiting = new Gauge({
      name: 'stratus_lambda_isolate_waiters',
      help: 'Invocations waiting for an isolate (every isolate busy).',
      registers,
    });

    this.logsIngested = new Counter({
      name: 'stratus_logs_ingested_bytes_total',
      help: 'Bytes ingested into loggers (raw lines and events).',
      registers,
    });
    this.logsStreamed = new Counter({
      name: 'stratus_logs_streamed_bytes_total',
      help: 'Bytes of log lines sent to readers and followers.',
      registers,
    });
    this.logsFollowers = new Gauge({
      name: 'stratus_logs_followers',
      help: 'Open follow streams (?follow) on this instance.',
      registers,
    });
    this.logsStreams = new Gauge({
      name: 'stratus_logs_streams',
      help: 'Open log streams on this instance, followers included.',
      registers,
    });

    this.filesBytes = new Counter({
      name: 'stratus_files_bytes_total',
      help: 'File content bytes by direction: in (uploads stored), out (downloads sent in full).',
      labelNames: ['direction'],
      registers,
    });
    this.registryBytes = new Counter({
      name: 'stratus_registry_bytes_total',
      help: 'Container registry bytes by direction: in (blob and chunk uploads received). The registry is push-only, so no out.',
      labelNames: ['direction'],
      registers,
    });

    this.kvSeq = new Gauge({
      name: 'stratus_kv_seq',
      help: "The key-value node's last sequence number.",
      registers,
    });
    this.kvOperations = new Counter({
      name: 'stratus_kv_operations_total',
      help: 'Key-value reads and writes served by this instance, by kind (read, write).',
      labelNames: ['kind'],
      registers,
    });
    this.kvReplication = new Counter({
      name: 'stratus_kv_replication_commands_total',
      help: 'Replication commands by direction: sent to children, received from the parent.',
      labelNames: ['direction'],
      registers,
    });
    this.kvChildren = new Gauge({
      name: 'stratus_kv_children',
      help: 'Replication streams this instance serves to child nodes.',
      registers,
    });
    this.kvParentConnected = new Gauge({
      name: 'stratus_kv_parent_connected',
      help: 'A replica: 1 while its parent link is connected (a primary: 1).',
      registers,
    });
    this.kvReplicaLag = new Gauge({
      name: 'stratus_kv_replica_lag_seconds',
      help: "A replica following its parent on this instance: now minus the time of the newest line from the parent (commands carry their write time, pings the parent's clock every 15 s; whole seconds); 0 where no follower runs here.",
      registers,
    });
  }

  // ---- the request path ----

  requestStarted(port: PortName): void {
    this.inFlight[port]++;
  }

  /** A finished request (gateway finish step); `auth` on the public port once authentication ran. */
  requestFinished(sample: RequestSample, auth: AuthKind | undefined): void {
    const { port, service, status } = sample;
    this.inFlight[port]--;
    if (auth !== undefined) this.authCounts[auth]++;
    const m = sample.method === undefined ? OTHER_METHOD : (METHOD_INDEX.get(sample.method) ?? OTHER_METHOD);
    let routes = this.routes.get(service);
    if (routes === undefined) this.routes.set(service, (routes = new Map()));
    let route = routes.get(sample.route);
    if (route === undefined) {
      const name = this.routeCount < MAX_ROUTES ? sample.route : 'other';
      route = routes.get(name);
      if (route === undefined) {
        route = { service, route: name, byCode: new Map(), latency: [] };
        routes.set(name, route);
        this.routeCount++;
      }
    }
    // Port, method and status in one number: status < 1000, method < 8.
    const code = (port === 'public' ? 0 : 10_000) + m * 1000 + status;
    let series = route.byCode.get(code);
    if (series === undefined) {
      series = {
        labels: { port, service, route: route.route, method: METHOD_NAMES[m]!, code: String(status) },
        count: 0,
        bytesIn: 0,
        bytesOut: 0,
      };
      route.byCode.set(code, series);
    }
    series.count++;
    series.bytesIn += sample.bytesIn;
    series.bytesOut += sample.bytesOut;
    (route.latency[m] ??= new Buckets(LATENCY_BUCKETS)).observe(sample.seconds);
  }

  private *routeSeries(): Iterable<RouteSeries> {
    for (const routes of this.routes.values()) yield* routes.values();
  }

  private *requestSeries(): Iterable<RequestSeries> {
    for (const route of this.routeSeries()) yield* route.byCode.values();
  }

  private bytesByService(field: 'bytesIn' | 'bytesOut'): Sample[] {
    const sums = new Map<string, { labels: Record<string, string>; value: number }>();
    for (const series of this.requestSeries()) {
      const { port, service } = series.labels;
      const key = `${port}\u0000${service}`;
      const sum = sums.get(key);
      if (sum) sum.value += series[field];
      else sums.set(key, { labels: { port, service }, value: series[field] });
    }
    return [...sums.values()];
  }

  // ---- storage ----

  /** A batch of writes that shared one commit (src/store/group-commit.ts `CommitObserver`). */
  readonly commit = (group: string, calls: number, seconds: number): void => {
    this.commitBatch.observe({ group }, calls);
    this.commitSeconds.observe({ group }, seconds);
  };

  // ---- services ----

  delivery(target: 'lambda' | 'webhook', outcome: 'succeeded' | 'failed' | 'dead'): void {
    this.deliveries.inc({ target, outcome });
  }

  /** Sets the per-scheduler series: the largest SCHEDULER_SERIES_CAP by tasks, the rest under OTHER_SCHEDULERS. */
  setSchedulers(rows: readonly SchedulerTaskCounts[]): void {
    const size = (row: SchedulerTaskCounts) => row.scheduled + row.inflight + row.dead;
    const sorted = [...rows].sort((a, b) => size(b) - size(a) || (a.scheduler < b.scheduler ? -1 : 1));
    this.schedulerTasks.reset();
    const set = (scheduler: string, row: Omit<SchedulerTaskCounts, 'scheduler'>) => {
      this.schedulerTasks.set({ scheduler, state: 'scheduled' }, row.scheduled);
      this.schedulerTasks.set({ scheduler, state: 'inflight' }, row.inflight);
      this.schedulerTasks.set({ scheduler, state: 'dead' }, row.dead);
    };
    for (const row of sorted.slice(0, SCHEDULER_SERIES_CAP)) set(row.scheduler, row);
    const rest = sorted.slice(SCHEDULER_SERIES_CAP);
    if (rest.length > 0)
      set(OTHER_SCHEDULERS, {
        scheduled: rest.reduce((n, r) => n + r.scheduled, 0),
        inflight: rest.reduce((n, r) => n + r.inflight, 0),
        dead: rest.reduce((n, r) => n + r.dead, 0),
      });
    this.schedulers.set(rows.length);
  }

  /** A finished lambda run; `errorCode` null when it succeeded. */
  invocation(trigger: string, errorCode: string | null, seconds: number): void {
    const outcome =
      errorCode === null
        ? 'ok'
        : errorCode === 'lambda_timeout'
          ? 'timeout'
          : errorCode === 'lambda_memory'
            ? 'memory'
            : errorCode === 'lambda_response_too_large'
              ? 'response_too_large'
              : 'error';
    this.lambdaInvocations.inc({ trigger, outcome });
    this.lambdaDuration.observe({ trigger }, seconds);
  }

  logsIngestedBytes(bytes: number): void {
    if (bytes > 0) this.logsIngested.inc(bytes);
  }

  logsStreamedBytes(bytes: number): void {
    if (bytes > 0) this.logsStreamed.inc(bytes);
  }

  /** A log stream opened (+1) or closed (-1). */
  logsStream(delta: 1 | -1, follow: boolean): void {
    this.logsStreams.inc(delta);
    if (follow) this.logsFollowers.inc(delta);
  }

  files(direction: 'in' | 'out', bytes: number): void {
    if (bytes > 0) this.filesBytes.inc({ direction }, bytes);
  }

  registryReceived(bytes: number): void {
    if (bytes > 0) this.registryBytes.inc({ direction: 'in' }, bytes);
  }

  /** The PostgreSQL pool as it is now (a probe). */
  setSqlPool(pool: { total: number; idle: number; waiting: number; max: number }): void {
    this.sqlPoolConnections.set({ state: 'idle' }, pool.idle);
    this.sqlPoolConnections.set({ state: 'busy' }, pool.total - pool.idle);
    this.sqlPoolConnections.set({ state: 'max' }, pool.max);
    this.sqlPoolWaiting.set(pool.waiting);
  }

  /** A fence's round trip in seconds, or null when it failed (the notifier is reconnecting). */
  setNotifierLag(seconds: number | null): void {
    this.notifierConnected.set(seconds === null ? 0 : 1);
    if (seconds !== null) this.notifierLag.set(seconds);
  }

  notifierResynced(): void {
    this.notifierResyncs.inc();
  }

  setLambdaPool(pool: { idle: number; busy: number; waiting: number }): void {
    this.lambdaIsolates.set({ state: 'idle' }, pool.idle);
    this.lambdaIsolates.set({ state: 'busy' }, pool.busy);
    this.lambdaWaiting.set(pool.waiting);
  }

  /**
   * The key-value node as a probe sees it. The counts are totals the node keeps since the
   * process started (its /v1/metrics figures), mirrored into counters.
   */
  setKv(node: {
    seq: number;
    reads: number;
    writes: number;
    commandsSent: number;
    commandsReceived: number;
    children: number;
    parentConnected: boolean;
    /** Null where no follower runs on this instance (a primary, or another instance holds the lease): 0. */
    lagSeconds: number | null;
  }): void {
    this.kvSeq.set(node.seq);
    mirror(this.kvOperations, { kind: 'read' }, node.reads);
    mirror(this.kvOperations, { kind: 'write' }, node.writes);
    mirror(this.kvReplication, { direction: 'sent' }, node.commandsSent);
    mirror(this.kvReplication, { direction: 'received' }, node.commandsReceived);
    this.kvChildren.set(node.children);
    this.kvParentConnected.set(node.parentConnected ? 1 : 0);
    this.kvReplicaLag.set(node.lagSeconds ?? 0);
  }

  // ---- scrape time ----

  /**
   * Work that sets gauges when the registry is read, at most once per `ttlMs` (a query's result
   * is reused meanwhile); a scrape waits at most two seconds for it. Returns the unregistration.
   */
  probe(name: string, run: () => void | Promise<void>, ttlMs = 0): () => void {
    const probe: Probe = { name, run, ttlMs, last: -Infinity, running: undefined };
    this.probes.push(probe);
    return () => {
      const at = this.probes.indexOf(probe);
      if (at >= 0) this.probes.splice(at, 1);
    };
  }

  /** The Prometheus text of every family, probes run first. */
  async render(): Promise<string> {
    await Promise.all(this.probes.map((probe) => this.runProbe(probe)));
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private runProbe(probe: Probe): Promise<void> {
    if (probe.running === undefined && performance.now() - probe.last >= probe.ttlMs) {
      probe.running = (async () => {
        try {
          await probe.run();
        } catch {
          this.probeErrors.inc({ probe: probe.name });
        } finally {
          probe.last = performance.now();
          probe.running = undefined;
        }
      })();
    }
    const running = probe.running;
    if (running === undefined) return Promise.resolve();
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, PROBE_WAIT_MS);
      timer.unref();
    });
    return Promise.race([running, waited]).finally(() => clearTimeout(timer));
  }
}

/** Sets a counter to a monotonic total kept elsewhere. */
function mirror(counter: Counter, labels: Record<string, string>, total: number): void {
  counter.remove(labels);
  counter.inc(labels, total);
}
