import { join } from 'node:path';
import { createServiceApp } from '../../core/app.ts';
import type { ServiceDefinition } from '../context.ts';
import type { MigrationSet } from '../../store/migrate.ts';
import { ReplicationFeed } from './feed.ts';
import { ParentFollower } from './follower.ts';
import { parentHeaders } from './parent.ts';
import { registerKvRoutes, type KvCounters, type KvNode } from './routes/index.ts';
import { KvStorage } from './storage.ts';

/** Log entries a node keeps for children to resume from (about; trimmed every few seconds). */
const DEFAULT_LOG_KEEP = 100_000;
const TRIM_INTERVAL_MS = 5_000;

export interface KvOptions {
  /** Replication log entries kept for resuming children, and how often the log is trimmed. */
  logKeep?: number;
  trimIntervalMs?: number;
  /** A replica's reconnect back-off and silence limit (tests shorten them). */
  backoffMs?: number;
  maxBackoffMs?: number;
  silenceMs?: number;
}

/** The node keeps its data in a SQLite file of its own, not in the platform's tables. */
const noMigrations: MigrationSet = { owner: 'kv', migrations: [] };

/**
 * The key-value node (see its README): collections of JSON values, durable in the node's own SQLite file,
 * replicated down a tree of nodes (`--kv-parent` / `KV_PARENT_URL` makes this node a replica).
 */
export function createKvService(options: KvOptions = {}): ServiceDefinition {
  return {
    name: 'kv',
    migrations: noMigrations,
    async build({ settings, logger, version }) {
      const app = await createServiceApp({
        name: 'kv',
        title: 'Stratus key-value node',
        version,
        logger,
        description: 'Key-value node: collections of JSON values with node-wide seq and per-key versions, durable, replicated parent to child.',
        // Values round-trip exactly (integers beyond 2^53 included), whatever the Content-Type.
        exactJson: true,
      });
      const storage = KvStorage.open(join(settings.dataDir, 'kv', 'kv.db'), settings.sqliteSynchronous);
      const counters: KvCounters = { writes: 0, reads: 0, commandsSent: 0, commandsReceived: 0 };
      const feed = new ReplicationFeed(storage, counters, logger);
      const headers = parentHeaders(settings);
      const follower = settings.kvParentUrl
        ? new ParentFollower(storage, feed, counters, { parentUrl: settings.kvParentUrl, headers, ...pick(options) }, logger)
        : undefined;
      const node: KvNode = { name: settings.kvNodeName, parentUrl: settings.kvParentUrl, parentHeaders: headers, startedAt: Date.now(), storage, feed, follower, counters };
      registerKvRoutes(app, node);

      const trimTimer = setInterval(() => {
        storage.trimLog(options.logKeep ?? DEFAULT_LOG_KEEP).catch((error: unknown) => logger.warn({ err: error }, 'kv log trim failed'));
      }, options.trimIntervalMs ?? TRIM_INTERVAL_MS);
      trimTimer.unref();
      app.addHook('onReady', async () => follower?.start());
      app.addHook('onClose', async () => {
        clearInterval(trimTimer);
        follower?.stop();
        feed.close();
        await storage.close();
      });
      return app;
    },
  };
}

function pick(options: KvOptions): { backoffMs?: number; maxBackoffMs?: number; silenceMs?: number } {
  const { backoffMs, maxBackoffMs, silenceMs } = options;
  return { ...(backoffMs === undefined ? {} : { backoffMs }), ...(maxBackoffMs === undefined ? {} : { maxBackoffMs }), ...(silenceMs === undefined ? {} : { silenceMs }) };
}

export const kvService: ServiceDefinition = createKvService();
