import { randomUUID } from 'node:crypto';
import { existsSync, renameSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createServiceApp } from '../../core/app.ts';
import type { ServiceDefinition } from '../context.ts';
import { ReplicationFeed } from './feed.ts';
import { ParentFollower } from './follower.ts';
import { FollowerLease } from './lease.ts';
import { kvMigrations } from './migrations.ts';
import { parentHeaders } from './parent.ts';
import { KvRepository } from './repository.ts';
import { registerKvRoutes, type KvCounters, type KvNode } from './routes/index.ts';
import { parentLink } from './routes/common.ts';

/** Log entries a node keeps for children to resume from (about; trimmed every few seconds). */
const DEFAULT_LOG_KEEP = 100_000;
const TRIM_INTERVAL_MS = 5_000;
/** The node's figures are read at most this often for metrics. */
const KV_PROBE_TTL_MS = 5_000;

export interface KvOptions {
  /** Replication log entries kept for resuming children, and how often the log is trimmed. */
  logKeep?: number;
  trimIntervalMs?: number;
  /** A replica's reconnect back-off and silence limit (tests shorten them). */
  backoffMs?: number;
  maxBackoffMs?: number;
  silenceMs?: number;
}

/**
 * The key-value node (see its README): collections of JSON values, durable in the platform's
 * database (so every instance on one PostgreSQL database serves the same node), replicated down a
 * tree of nodes (`--kv-parent` / `KV_PARENT_URL` makes this node a replica).
 */
export function createKvService(options: KvOptions = {}): ServiceDefinition {
  return {
    name: 'kv',
    migrations: kvMigrations,
    async build({ settings, store, logger, version, metrics }) {
      const app = await createServiceApp({
        name: 'kv',
        domain: settings.domain,
        title: 'Stratus key-value node',
        version,
        logger,
        description:
          'Key-value node: collections of JSON values with node-wide seq and per-key versions, durable, replicated parent to child.',
        // Values round-trip exactly (integers beyond 2^53 included), whatever the Content-Type.
        exactJson: true,
      });
      const database = store.sql.database;
      // The notifier keeps the read cache right across instances on a shared database.
      const repository = new KvRepository(database, { feed: store.notifier });
      await importNodeFile(repository, join(settings.dataDir, 'kv', 'kv.db'), logger);
      const counters: KvCounters = { writes: 0, reads: 0, commandsSent: 0, commandsReceived: 0 };
      // Other instances write to the node only where the database is shared.
      const feed = new ReplicationFeed(repository, counters, logger, database.soleWriter ? undefined : store.notifier);
      const headers = parentHeaders(settings);
      let lease: FollowerLease | undefined;
      let follower: ParentFollower | undefined;
      if (settings.kvParentUrl) {
        const holder = `${hostname()}/${process.pid}/${randomUUID()}`;
        follower = new ParentFollower(
          repository,
          holder,
          feed,
          counters,
          { parentUrl: settings.kvParentUrl, headers, ...pick(options) },
          logger,
        );
        lease = new FollowerLease(repository, holder, follower, logger, database.soleWriter);
      }
      const node: KvNode = {
        name: settings.kvNodeName,
        parentUrl: settings.kvParentUrl,
        parentHeaders: headers,
        startedAt: Date.now(),
        repository,
        feed,
        lease,
        counters,
      };
      registerKvRoutes(app, node);
      // The node at scrape time (README.md: Metrics): its seq (one small read), the counters it
      // keeps for /v1/metrics, and a follower's lag behind its parent.
      const stopProbe = metrics?.probe(
        'kv',
        async () => {
          const [state, link] = await Promise.all([repository.state(), parentLink(node)]);
          const newest = follower?.running ? follower.newestTimestamp : null;
          metrics.setKv({
            seq: state.lastSeq,
            reads: counters.reads,
            writes: counters.writes,
            commandsSent: counters.commandsSent,
            commandsReceived: counters.commandsReceived,
            children: feed.children,
            parentConnected: link.connected,
            lagSeconds: newest === null ? null : Math.max(0, Math.floor(Date.now() / 1000) - newest),
          });
        },
        KV_PROBE_TTL_MS,
      );

      const trimTimer = setInterval(() => {
        repository
          .trimLog(options.logKeep ?? DEFAULT_LOG_KEEP)
          .catch((error: unknown) => logger.warn({ err: error }, 'kv log trim failed'));
      }, options.trimIntervalMs ?? TRIM_INTERVAL_MS);
      trimTimer.unref();
      app.addHook('onReady', async () => lease?.start());
      app.addHook('onClose', async () => {
        stopProbe?.();
        clearInterval(trimTimer);
        await lease?.stop();
        feed.close();
        repository.close();
      });
      return app;
    },
  };
}

/**
 * A node file of the layout before the node moved into the platform's database: copied in once,
 * when the node is still empty, then renamed `kv.db.imported`. When the node already holds data the
 * file is left where it is, with a warning.
 */
async function importNodeFile(repository: KvRepository, file: string, logger: ServiceContextLogger): Promise<void> {
  if (!existsSync(file)) return;
  if (await repository.importFile(file)) {
    renameSync(file, `${file}.imported`);
    logger.info({ file }, 'kv node file imported into the platform database');
  } else {
    logger.warn({ file }, 'kv node file not imported: the node already holds data');
  }
}

type ServiceContextLogger = Parameters<ServiceDefinition['build']>[0]['logger'];

function pick(options: KvOptions): { backoffMs?: number; maxBackoffMs?: number; silenceMs?: number } {
  const { backoffMs, maxBackoffMs, silenceMs } = options;
  return {
    ...(backoffMs === undefined ? {} : { backoffMs }),
    ...(maxBackoffMs === undefined ? {} : { maxBackoffMs }),
    ...(silenceMs === undefined ? {} : { silenceMs }),
  };
}

export const kvService: ServiceDefinition = createKvService();
