import pino from 'pino';
import type { FastifyBaseLogger } from 'fastify';
import type { ServiceName, Settings } from './config.ts';
import { SettingsError } from './config.ts';
import type { ServiceApp } from './core/app.ts';
import type { ServiceDefinition } from './services/context.ts';
import { VERSION } from './core/version.ts';
import { buildGatewayApp } from './gateway/app.ts';
import { Authenticator } from './gateway/authenticate.ts';
import { ApiKeyVerifier } from './gateway/keys.ts';
import { createPolicy } from './gateway/policy.ts';
import { credentialedOrigins } from './gateway/origins.ts';
import { ProjectDirectory } from './gateway/projects.ts';
import { createUpstreamProxy, type UpstreamProxy } from './gateway/proxy.ts';
import { PlatformServiceCalls } from './gateway/service-calls.ts';
import { Readiness } from './gateway/readiness.ts';
import { TrustedProxies } from './gateway/client-address.ts';
import { createGatewayHandler, listen, type Listener } from './gateway/server.ts';
import { GatewayStats } from './gateway/stats.ts';
import { InstanceRegistry, instancesMigrations } from './instances/index.ts';
import { PlatformMetrics } from './metrics/index.ts';
import { AVAILABLE_SERVICES } from './services/index.ts';
import { apikeysService } from './services/apikeys/index.ts';
import { authService } from './services/auth/index.ts';
import { OidcProviders } from './services/auth/index.ts';
import { migrateStore, openStore, type Store } from './store/index.ts';

export interface RunningPlatform {
  readonly publicPort: number;
  readonly internalPort: number;
  readonly services: readonly ServiceName[];
  /** Services this process reaches in other processes. */
  readonly remote: readonly ServiceName[];
  readonly store: Store;
  readonly keys: ApiKeyVerifier;
  /**
   * Drains and stops (README.md: Rolling restarts): readiness 503, no new connections, in-flight
   * requests get `shutdownTimeout` seconds, then everything closes. Calls after the first share it.
   */
  close(): Promise<void>;
}

/** The gateway reads keys, projects, sessions and users, so their tables exist wherever it runs. */
const GATEWAY_MIGRATIONS = [instancesMigrations, apikeysService.migrations, authService.migrations];

/** The service definitions a process runs: `--services`, or every available one. */
export function selectServices(settings: Pick<Settings, 'services'>): ServiceDefinition[] {
  if (settings.services === null) return [...AVAILABLE_SERVICES.values()];
  return settings.services.map((name) => {
    const definition = AVAILABLE_SERVICES.get(name);
    if (!definition)
      throw new SettingsError(
        `the ${name} service is not available in this build (available: ${[...AVAILABLE_SERVICES.keys()].join(', ')})`,
      );
    return definition;
  });
}

/**
 * The process logger. Lines are written to stdout through a buffer (one write per few KiB rather
 * than one per line: the access log writes a line per request); `flush()` before exiting.
 */
export function createLogger(settings: Pick<Settings, 'logLevel'>): pino.Logger {
  return pino(
    { level: settings.logLevel, base: { pid: process.pid } },
    pino.destination({ dest: 1, sync: false, minLength: 4096 }),
  );
}

/** Applies every available service's migrations (`stratus migrate`). */
export async function migrateAll(settings: Settings): Promise<string[]> {
  const store = await openStore(settings);
  try {
    return await migrateStore(store, [
      ...new Set([...GATEWAY_MIGRATIONS, ...[...AVAILABLE_SERVICES.values()].map((s) => s.migrations)]),
    ]);
  } finally {
    await store.close();
  }
}

/**
 * One Stratus process: the store, the selected services' apps (migrated and ready), and the
 * gateway on the public port and on the loopback-only internal port.
 */
export async function startPlatform(
  settings: Settings,
  logger: FastifyBaseLogger = createLogger(settings),
): Promise<RunningPlatform> {
  const definitions = selectServices(settings);
  const store = await openStore(settings);
  // One registry per platform: tests run several in one process (README.md: Metrics).
  const metrics = new PlatformMetrics();
  store.sql.database.commitObserver = metrics.commit;
  const closers: (() => void)[] = [...watchStore(store, metrics)];
  const apps = new Map<ServiceName, ServiceApp>();
  const upstreams = new Map<ServiceName, UpstreamProxy>();
  const listeners: Listener[] = [];
  let gateway: ServiceApp | null = null;
  let instance: InstanceRegistry | null = null;
  const readiness = new Readiness(store.sql.database, settings.domain);
  let closing: Promise<void> | undefined;
  // The shutdown sequence (README.md: Rolling restarts): readiness 503 and both ports drain at once
  // (no new connections, Connection: close, streams and waiting reserves end resumably), in-flight
  // requests get shutdownTimeout seconds, the rest is cut; then the apps, proxies and store close.
  const close = () =>
    (closing ??= (async () => {
      readiness.drain();
      // Behind a balancer, serve on as before until its health check has seen the 503 and it has
      // stopped sending here: a kept-alive connection closed now may be the one it is sending its
      // next request on (it would drop that request's client without an answer), and a
      // connection still in the accept queue would be reset.
      if (settings.shutdownDelay > 0)
        await new Promise((resolve) => setTimeout(resolve, settings.shutdownDelay * 1000));
      for (const listener of listeners) listener.drain();
      // One grace for the whole instance: a port keeps its open connections while the other one
      // still has requests in flight (a health check or a last request on a kept-alive connection).
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(listeners.map((l) => l.settled())),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, settings.shutdownTimeout * 1000))),
      ]);
      clearTimeout(timer);
      const cut = await Promise.all(listeners.map((l) => l.cut()));
      const total = cut.reduce((a, b) => a + b, 0);
      if (total > 0)
        logger.warn(
          { requests: total, timeoutSeconds: settings.shutdownTimeout },
          'shutdown timeout: cut requests still in flight',
        );
      await closeRest();
    })());
  const closeRest = async () => {
    await Promise.all([...apps.values(), ...(gateway ? [gateway] : [])].map((app) => app.close()));
    await Promise.all([...upstreams.values()].map((proxy) => proxy.close()));
    for (const stop of closers) stop();
    await instance?.close();
    await store.close();
  };
  try {
    const sets = [...GATEWAY_MIGRATIONS, ...definitions.map((d) => d.migrations)];
    await migrateStore(store, [...new Set(sets)]);
    instance = await InstanceRegistry.start(store.sql.database, {
      version: VERSION,
      services: definitions.map((d) => d.name),
      timeoutMs: settings.instanceTimeoutSeconds * 1000,
      flushMs: settings.statsFlushSeconds * 1000,
      logger,
    });
    // A service running here is served here; the others go to their configured URL, if any.
    const upstreamUrls: Partial<Record<ServiceName, string>> = {};
    for (const [name, url] of Object.entries(settings.upstreams) as [ServiceName, string][]) {
      if (definitions.some((d) => d.name === name)) continue;
      upstreamUrls[name] = url;
    }
    // Filled once both ports listen (a lambda may never fetch from them: core/egress.ts).
    const ports: number[] = [];
    const serviceCalls = new PlatformServiceCalls({ domain: settings.domain, apps, upstreamUrls });
    closers.push(() => void serviceCalls.close());
    for (const definition of definitions) {
      const app = await definition.build({
        settings,
        store,
        logger: logger.child({ service: definition.name }),
        version: VERSION,
        instance,
        services: serviceCalls,
        ports,
        metrics,
      });
      await app.ready();
      apps.set(definition.name, app);
    }
    for (const [name, url] of Object.entries(upstreamUrls) as [ServiceName, string][])
      upstreams.set(name, createUpstreamProxy(url, { headersTimeoutMs: settings.upstreamTimeoutSeconds * 1000 }));
    const stats = new GatewayStats(instance);
    gateway = await buildGatewayApp({
      policyRules: settings.routePolicies,
      version: VERSION,
      logger: logger.child({ service: 'gateway' }),
      domain: settings.domain,
      connection: store.sql,
      stats,
      services: apps,
      upstreamUrls,
      readiness,
    });
    await gateway.ready();

    const keys = new ApiKeyVerifier(store.sql, store.notifier);
    const projects = new ProjectDirectory(store.sql, store.notifier);
    closers.push(
      () => keys.close(),
      () => projects.close(),
    );
    const proxies = new TrustedProxies(settings.trustedProxies);
    const authenticator = new Authenticator(store.sql, keys, new OidcProviders(settings.authProviders), settings);
    const options = {
      domain: settings.domain,
      services: apps,
      upstreams,
      gateway,
      projects,
      policy: createPolicy(settings.routePolicies),
      credentialedOrigins: credentialedOrigins(settings),
      stats,
      logger,
      proxies,
      metrics,
      writeAccessLog: settings.accessLog,
    };
    listeners.push(
      await listen(
        createGatewayHandler(
          { ...options, authenticator, ...(settings.metricsToken ? { metricsToken: settings.metricsToken } : {}) },
          false,
        ),
        settings.port,
        settings.host,
        {
          bodyIdleTimeoutMs: settings.bodyIdleTimeoutSeconds * 1000,
          maxConnectionsPerAddress: settings.maxConnectionsPerAddress,
          trustedProxies: proxies,
          readiness,
        },
      ),
    );
    listeners.push(
      await listen(
        createGatewayHandler({ ...options, authenticator: null }, true),
        settings.internalPort,
        settings.internalHost,
        { readiness },
      ),
    );
    ports.push(listeners[0]!.port, listeners[1]!.port);
    return {
      publicPort: listeners[0]!.port,
      internalPort: listeners[1]!.port,
      services: [...apps.keys()],
      remote: [...upstreams.keys()],
      store,
      keys,
      close,
    };
  } catch (error) {
    await close().catch(() => {});
    throw error;
  }
}

/** How often the store's scrape-time figures are read again at most (a fence is a round trip). */
const STORE_PROBE_TTL_MS = 5_000;

/**
 * The store's scrape-time figures (README.md: Metrics): the PostgreSQL pool, the notifier's lag (a
 * fence's round trip) and its resyncs. Returns what stops them.
 */
function watchStore(store: Store, metrics: PlatformMetrics): (() => void)[] {
  const pool = store.sql.pool;
  const stops = [
    store.notifier.onResync(() => metrics.notifierResynced()),
    metrics.probe(
      'notifier',
      async () => {
        const started = performance.now();
        const fenced = await store.notifier.fence().then(
          () => true,
          () => false,
        );
        metrics.setNotifierLag(fenced ? (performance.now() - started) / 1000 : null);
      },
      STORE_PROBE_TTL_MS,
    ),
  ];
  if (pool)
    stops.push(
      metrics.probe('sql_pool', () =>
        metrics.setSqlPool({
          total: pool.totalCount,
          idle: pool.idleCount,
          waiting: pool.waitingCount,
          max: pool.options.max ?? 10,
        }),
      ),
    );
  return stops;
}
