import type { Settings } from '../../config.ts';
import { createServiceApp } from '../../core/app.ts';
import type { ServiceDefinition } from '../context.ts';
import { BlobRefs, type BlobRefsOptions } from '../../store/blob/refs.ts';
import type { SqlConnection } from '../../store/db.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { BlobStore } from '../../store/blob/types.ts';
import { DriverRecords, RecordingDriver, type RuntimeDriver } from './driver.ts';
import { PodmanDriver } from './podman/driver.ts';
import { PodmanEngine } from './podman/engine.ts';
import { ContainerLogs } from './podman/logs.ts';
import { RepositoryOutput } from './output.ts';
import { LoggerTextIngest } from '../logger-ingest.ts';
import type { ServiceCalls } from '../context.ts';
import { runMigrations } from './migrations.ts';
import { UploadFollowers } from './registry/follower.ts';
import { RunRepository } from './repository.ts';
import { registerRoutes } from './routes/index.ts';
import { ContainerTraffic } from './traffic.ts';
import { describeRegistry } from './routes/registry/openapi.ts';

export type { RuntimeDriver, DesiredDeployment, DesiredState, ActualState, EnvVar, Volume } from './driver.ts';
export { DriverRecords, RecordingDriver } from './driver.ts';

/** Uploads idle this long are abandoned: unknown to the registry and swept with their chunks. */
export const UPLOAD_EXPIRY_MS = 24 * 60 * 60 * 1000;
const UPLOAD_SWEEP_INTERVAL_MS = 10 * 60 * 1000;

export interface RunServiceOptions {
  /** Largest blob accepted; default the `RUN_MAX_BLOB_BYTES` setting (10 GiB). */
  maxBlobBytes?: number;
  /** Replaces the driver the `RUN_DRIVER` setting selects (tests, embedders). */
  driver?: (connection: SqlConnection) => RuntimeDriver;
  /** Idle time after which an upload expires; default 24 h. */
  uploadExpiryMs?: number;
  /** How often expired uploads are swept; default every 10 minutes. */
  uploadSweepIntervalMs?: number;
  /** Blob reference sweeper settings (grace period, interval); tests shorten them. */
  blobRefs?: Pick<BlobRefsOptions, 'graceMs' | 'sweepIntervalMs' | 'now'>;
  /** Whether this instance follows the chunked uploads it receives (registry/follower.ts); default true. */
  followChunks?: boolean;
  /** Idle time after which an instance stops following a chunked upload; default 10 minutes. */
  followerIdleMs?: number;
  /** Clock in milliseconds (tests). */
  now?: () => number;
}

/** The driver the settings name (service README: Driver selection and failures). */
function driverFor(
  settings: Settings,
  connection: SqlConnection,
  repository: RunRepository,
  blobs: BlobStore,
  logger: FastifyBaseLogger,
  services: ServiceCalls | undefined,
): RuntimeDriver {
  switch (settings.runDriver) {
    case 'recording':
      return new RecordingDriver(connection);
    case 'podman': {
      const engine = new PodmanEngine({ binary: settings.runPodman });
      // Output of running containers, into the logger their repository names.
      const output = new RepositoryOutput(
        repository,
        new LoggerTextIngest(services, (context, message) => logger.warn(context, message)),
      );
      const logs = new ContainerLogs({
        binary: settings.runPodman,
        sink: output.sink,
        stillRunning: async (id) => {
          const state = (await engine.container(id))?.State;
          return state === 'running' || state === 'restarting';
        },
      });
      return new PodmanDriver({
        engine,
        logs,
        repository,
        blobs,
        records: new DriverRecords(connection),
        dataDir: settings.dataDir,
        memoryBytes: settings.runMemoryBytes,
        cpus: settings.runCpus,
        restart: settings.runRestart,
        startTimeoutMs: settings.runStartTimeoutSeconds * 1000,
        stopTimeoutSeconds: settings.runStopTimeoutSeconds,
        logger,
      });
    }
  }
}

/** The run service (its README): the console API and the push-only registry. */
export function createRunService(options: RunServiceOptions = {}): ServiceDefinition {
  return {
    name: 'run',
    migrations: runMigrations,
    async build({ settings, store, logger, version, services, metrics }) {
      const app = await createServiceApp({
        name: 'run',
        domain: settings.domain,
        openapiExtend: describeRegistry,
        title: 'Stratus Run API',
        version,
        logger,
        description:
          'Container repositories: a console API to start, stop and roll back repositories and save their env and volumes, and a push-only registry under /v2/.',
        jsonForAnyContentType: true,
      });
      const now = options.now ?? Date.now;
      const uploadExpiryMs = options.uploadExpiryMs ?? UPLOAD_EXPIRY_MS;
      const refs = new BlobRefs(store.sql, store.blobs, {
        ...options.blobRefs,
        onError: (error) => logger.warn({ err: error }, 'blob sweep failed; retrying on the next interval'),
      });
      const repository = new RunRepository(store.sql.database, refs);
      const driver = options.driver
        ? options.driver(store.sql)
        : driverFor(settings, store.sql, repository, store.blobs, logger, services);
      // The engine follows the stored desired states from the start (in the background: a slow
      // engine must not hold up the platform's start).
      if (driver.reconcile) {
        driver
          .reconcile()
          .catch((error: unknown) => logger.warn({ err: error, driver: driver.name }, 'reconciling the engine failed'));
      }

      const maxBlobBytes = options.maxBlobBytes ?? settings.runMaxBlobBytes;
      // A follower idle this long (no chunk) stops; the upload then finishes by re-reading its chunks.
      const followers = new UploadFollowers(
        store.blobs,
        maxBlobBytes,
        options.followerIdleMs ?? 10 * 60 * 1000,
        options.followChunks ?? true,
      );

      // `<slug>.run.<domain>`: traffic for a running container, answered before any route.
      const traffic = new ContainerTraffic(settings.domain, repository);
      app.addHook('onRequest', async (request, reply) => {
        const slug = traffic.slugOf(request.headers.host);
        if (slug === null) return;
        await traffic.handle(slug, request, reply);
        // Answered (or handed to the container): no route runs.
        return reply;
      });

      refs.start();
      // Abandoned uploads: released on a timer (unref'd; it never keeps the process alive).
      let sweeping: Promise<unknown> | undefined;
      const sweepTimer = setInterval(() => {
        if (sweeping) return;
        sweeping = repository
          .expireUploads(now() - uploadExpiryMs)
          .catch((error: unknown) => logger.warn({ err: error }, 'expiring abandoned uploads failed; retrying later'))
          .finally(() => (sweeping = undefined));
      }, options.uploadSweepIntervalMs ?? UPLOAD_SWEEP_INTERVAL_MS);
      sweepTimer.unref();
      app.addHook('onClose', async () => {
        clearInterval(sweepTimer);
        followers.close();
        await sweeping;
        await refs.stop();
        await driver.close?.();
        traffic.close();
      });

      await registerRoutes(app, {
        version,
        domain: settings.domain,
        services,
        repository,
        driver,
        blobs: store.blobs,
        refs,
        maxBlobBytes,
        uploadExpiryMs,
        now,
        followers,
        ...(metrics ? { received: (bytes: number) => metrics.registryReceived(bytes) } : {}),
      });
      return app;
    },
  };
}

export const runService: ServiceDefinition = createRunService();
