import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import { newId } from '../core/ids.ts';
import { all, run, type Work } from '../store/sql-work.ts';
import type { SqlDatabase } from '../store/sql/types.ts';

/** One running Stratus process of the platform, as the registry holds it (README.md). */
export interface InstanceRecord {
  readonly id: string;
  /** The machine's host name. */
  readonly host: string;
  readonly pid: number;
  readonly version: string;
  /** The services the process runs (the gateway runs in every one). */
  readonly services: readonly string[];
  /** Milliseconds since the epoch, on the instance's clock. */
  readonly startedAt: number;
  readonly lastSeen: number;
}

/** Counters a part of the platform publishes through the registry (README.md: Counters). */
export interface CounterSource {
  /** Names the counters' kind (`gateway`, `logs`); their names are the source's own keys. */
  readonly owner: string;
  /**
   * Entries to publish, each an absolute value since this instance started (never a delta, so a
   * lost or repeated write does no harm): every entry when `full`, else those changed since the
   * last call. Values are JSON-encoded as they are.
   */
  changes(full: boolean): [name: string, value: unknown][];
}

/** A value another live instance published. */
export interface PublishedCounter {
  readonly instance: string;
  readonly name: string;
  readonly value: unknown;
}

/** The registry as the parts of the platform use it (`ServiceContext.instance`; README.md). */
export interface PlatformInstance {
  readonly id: string;
  readonly startedAt: number;
  /** Publishes `source` every flush interval (README.md: Counters). */
  publish(source: CounterSource): void;
  /** What the other live instances published under `owner` (only `name` when given). */
  othersCounters(owner: string, name?: string): Promise<PublishedCounter[]>;
  /** Removes what every instance published under `owner` and `name` (a deleted logger's counters). */
  forget(owner: string, name: string): Promise<void>;
  /** The live instances, oldest first; this one always among them. */
  live(): Promise<InstanceRecord[]>;
}

export interface InstanceRegistryOptions {
  version: string;
  services: readonly string[];
  /** An instance whose last heartbeat is older drops out (`INSTANCE_TIMEOUT`); it heartbeats three times as often. */
  timeoutMs: number;
  /** How often counters that changed are written (`STATS_FLUSH_INTERVAL`). */
  flushMs: number;
  logger: FastifyBaseLogger;
}

// Serialises the sweeps of dead instances across instances (an advisory lock on PostgreSQL), so
// two sweepers never delete the same rows in different orders.
const SWEEP_LOCK_SPACE = 0x53544953; // "STIS"

interface InstanceRow {
  id: string;
  host: string;
  pid: number;
  version: string;
  services: string;
  started_at: number;
  last_seen: number;
}

/**
 * This process's entry in the platform's instance registry (README.md): registered at start,
 * heartbeating every third of the timeout, publishing its counters every flush interval, and
 * removed, with its counters, when it closes. An instance that stops heartbeating is left out of
 * every read once its heartbeat is older than the timeout, and deleted by the next sweep.
 */
export class InstanceRegistry implements PlatformInstance {
  readonly id = newId('instance');
  readonly startedAt = Date.now();
  private readonly host = hostname();
  private readonly sources: CounterSource[] = [];
  private readonly timers: NodeJS.Timeout[] = [];
  /** Publish every entry next time: at start, after a failed write, after being swept while alive. */
  private full = true;
  private running: Promise<void> | null = null;
  private closed = false;

  private constructor(
    private readonly database: SqlDatabase,
    private readonly options: InstanceRegistryOptions,
  ) {}

  /** Registers this process and starts its heartbeat and flush timers. */
  static async start(database: SqlDatabase, options: InstanceRegistryOptions): Promise<InstanceRegistry> {
    const registry = new InstanceRegistry(database, options);
    await registry.sync(true);
    const every = (ms: number, task: () => Promise<void>) => {
      const timer = setInterval(() => void task(), ms);
      timer.unref();
      registry.timers.push(timer);
    };
    every(options.timeoutMs / 3, async () => {
      await registry.sync(true);
      await registry.sweep();
    });
    every(options.flushMs, () => registry.sync(false));
    return registry;
  }

  publish(source: CounterSource): void {
    this.sources.push(source);
  }

  /** Writes the changed counters now (and the heartbeat); tests call it to skip the wait. */
  async flush(): Promise<void> {
    await this.running;
    await this.sync(true);
  }

  async othersCounters(owner: string, name?: string): Promise<PublishedCounter[]> {
    const since = Date.now() - this.options.timeoutMs;
    const rows = await this.database.read(() =>
      all<{ instance_id: string; name: string; value: string }>(
        `select c.instance_id, c.name, c.value from stratus_instance_counters c
          join stratus_instances i on i.id = c.instance_id
          where c.owner = ? and c.instance_id <> ? and i.last_seen >= ?${name === undefined ? '' : ' and c.name = ?'}`,
        ...(name === undefined ? [owner, this.id, since] : [owner, this.id, since, name]),
      ),
    );
    return rows.map((row) => ({ instance: row.instance_id, name: row.name, value: JSON.parse(row.value) as unknown }));
  }

  async forget(owner: string, name: string): Promise<void> {
    await this.database.write(() =>
      run('delete from stratus_instance_counters where owner = ? and name = ?', owner, name),
    );
  }

  async live(): Promise<InstanceRecord[]> {
    const rows = await this.database.read(() =>
      all<InstanceRow>(
        'select id, host, pid, version, services, started_at, last_seen from stratus_instances where last_seen >= ? and id <> ?',
        Date.now() - this.options.timeoutMs,
        this.id,
      ),
    );
    const instances: InstanceRecord[] = rows.map((row) => ({
      id: row.id,
      host: row.host,
      pid: Number(row.pid),
      version: row.version,
      services: JSON.parse(row.services) as string[],
      startedAt: Number(row.started_at),
      lastSeen: Number(row.last_seen),
    }));
    // This instance is answering, so it is live whatever its last written heartbeat says.
    instances.push(this.record(Date.now()));
    return instances.sort((a, b) => a.startedAt - b.startedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** Stops the timers and removes this instance and its counters (README.md: Leaving). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    await this.running;
    const id = this.id;
    await this.database
      .write(() => run('delete from stratus_instances where id = ?', id))
      .catch((error: unknown) =>
        this.options.logger.warn({ err: error }, 'could not remove this instance from the registry'),
      );
  }

  private record(lastSeen: number): InstanceRecord {
    return {
      id: this.id,
      host: this.host,
      pid: process.pid,
      version: this.options.version,
      services: this.options.services,
      startedAt: this.startedAt,
      lastSeen,
    };
  }

  /** One write: the heartbeat (always when `heartbeat`) and the counters that changed. */
  private sync(heartbeat: boolean): Promise<void> {
    if (this.closed) return Promise.resolve();
    // One write at a time; a tick that finds one running is covered by the next.
    if (this.running) return this.running;
    const done = this.syncOnce(heartbeat).finally(() => {
      this.running = null;
    });
    this.running = done;
    return done;
  }

  private async syncOnce(heartbeat: boolean): Promise<void> {
    const full = this.full;
    this.full = false;
    const entries: [string, string, string][] = [];
    for (const source of this.sources)
      for (const [name, value] of source.changes(full)) entries.push([source.owner, name, JSON.stringify(value)]);
    if (!heartbeat && entries.length === 0) return;
    const self = this.record(Date.now());
    try {
      const reinserted = await this.database.write(() => syncWork(self, entries));
      // Swept while alive (a long pause): the row is back, and so must every counter be.
      if (reinserted && !full) {
        this.full = true;
        await this.syncOnce(false);
      }
    } catch (error) {
      this.full = true;
      this.options.logger.warn({ err: error }, 'instance registry: heartbeat or counter flush failed');
    }
  }

  /** Deletes instances whose heartbeat is older than the timeout, with their counters. */
  private async sweep(): Promise<void> {
    if (this.closed) return;
    const { database, id } = this;
    const before = Date.now() - this.options.timeoutMs;
    await database
      .write(function* () {
        yield* database.lockName(SWEEP_LOCK_SPACE, 'sweep');
        yield* run('delete from stratus_instances where last_seen < ? and id <> ?', before, id);
      })
      .catch((error: unknown) => this.options.logger.warn({ err: error }, 'instance registry: sweep failed'));
  }
}

function* syncWork(self: InstanceRecord, entries: readonly [string, string, string][]): Work<boolean> {
  let reinserted = false;
  if ((yield* run('update stratus_instances set last_seen = ? where id = ?', self.lastSeen, self.id)) === 0) {
    yield* run(
      'insert into stratus_instances (id, host, pid, version, services, started_at, last_seen) values (?, ?, ?, ?, ?, ?, ?)',
      self.id,
      self.host,
      self.pid,
      self.version,
      JSON.stringify(self.services),
      self.startedAt,
      self.lastSeen,
    );
    reinserted = true;
  }
  for (const [owner, name, value] of entries)
    yield* run(
      `insert into stratus_instance_counters (instance_id, owner, name, value) values (?, ?, ?, ?)
        on conflict (instance_id, owner, name) do update set value = excluded.value`,
      self.id,
      owner,
      name,
      value,
    );
  return reinserted;
}
