// The podman driver (service README, "The podman driver"): runs each running repository as one
// container of the machine's podman, assembled from the platform's own registry data, and
// reports what the engine says (decisions 49).
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { rfc3339 } from '../../../core/ids.ts';
import type { BlobStore } from '../../../store/blob/types.ts';
import type {
  ActualRunState,
  ActualState,
  DesiredDeployment,
  DriverRecord,
  DriverRecords,
  RuntimeDriver,
} from '../driver.ts';
import type { RepositoryRow } from '../repository.ts';
import { EngineError, type EngineContainer, type PodmanEngine } from './engine.ts';
import { loadImage, type ManifestSource } from './image.ts';
import type { ContainerLogs } from './logs.ts';

/** Labels on every container and volume the driver makes (`podman ps --filter label=…`). */
export const LABELS = {
  scope: 'io.stratus.scope',
  repository: 'io.stratus.repository',
  reference: 'io.stratus.reference',
  digest: 'io.stratus.digest',
  config: 'io.stratus.config',
  appliedAt: 'io.stratus.applied-at',
} as const;

export interface PodmanDriverOptions {
  engine: PodmanEngine;
  /** Stored manifests, the repositories' desired states, and the engine scope. */
  repository: ManifestSource & {
    allRepositories(): Promise<RepositoryRow[]>;
    engineScope(candidate: string): Promise<string>;
  };
  blobs: BlobStore;
  records: DriverRecords;
  /** `<dataDir>/run/`: volumes' directories and images being loaded live under it. */
  dataDir: string;
  memoryBytes: number;
  cpus: number;
  restart: 'no' | 'on-failure' | 'always' | 'unless-stopped';
  startTimeoutMs: number;
  stopTimeoutSeconds: number;
  logger: FastifyBaseLogger;
  /** Follows running containers' output into their repositories' loggers (podman/logs.ts). */
  logs?: ContainerLogs;
}

const hash = (text: string, length = 12) => createHash('sha256').update(text).digest('hex').slice(0, length);

/** A DNS- and engine-safe short form of a repository name (containers' names stay readable). */
function slug(name: string): string {
  return name
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, 40)
    .replace(/-+$/, '');
}

function engineState(container: EngineContainer): ActualRunState {
  switch (container.State) {
    case 'running':
    case 'paused':
      return 'running';
    case 'created':
    case 'configured':
    case 'initialized':
      return 'starting';
    case 'restarting':
      return 'restarting';
    case 'exited':
      return 'exited';
    case 'stopped':
    case 'stopping':
    case 'removing':
      return 'stopped';
    default:
      return 'unknown';
  }
}

/** The port the container serves: a `PORT` saved with the env, else the image's lowest `EXPOSE`d TCP port. */
function servedPort(desired: DesiredDeployment, exposed: number | null): number | null {
  const saved = desired.env.find((e) => e.key === 'PORT')?.desired_value;
  if (saved !== undefined && /^\d+$/.test(saved) && Number(saved) > 0 && Number(saved) < 65536) return Number(saved);
  return exposed;
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export class PodmanDriver implements RuntimeDriver {
  readonly name = 'podman';
  private readonly engine: PodmanEngine;
  private scopeValue: Promise<string> | undefined;
  /** One change at a time per repository, in the order asked (a promise chain each). */
  private readonly queues = new Map<string, Promise<unknown>>();
  private readyCache: { at: number; ok: boolean } | undefined;
  private closed = false;

  constructor(private readonly options: PodmanDriverOptions) {
    this.engine = options.engine;
  }

  /** The label value of this platform's containers (made once, kept in SQL). */
  scope(): Promise<string> {
    this.scopeValue ??= this.options.repository.engineScope(randomBytes(6).toString('hex'));
    return this.scopeValue;
  }

  private serialize<T>(repository: string, work: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(repository) ?? Promise.resolve();
    const next = previous.then(work, work);
    const settled = next.catch(() => undefined);
    this.queues.set(repository, settled);
    void settled.then(() => {
      if (this.queues.get(repository) === settled) this.queues.delete(repository);
    });
    return next;
  }

  private async containersOf(repository: string): Promise<EngineContainer[]> {
    return this.engine.containers({ [LABELS.scope]: await this.scope(), [LABELS.repository]: repository });
  }

  /** What makes a running container out of date: image, env, volumes and limits. */
  private configKey(desired: DesiredDeployment): string {
    const { memoryBytes, cpus, restart } = this.options;
    return hash(JSON.stringify([desired.digest, desired.env, desired.volumes, memoryBytes, cpus, restart]), 16);
  }

  apply(repository: string, desired: DesiredDeployment): Promise<void> {
    return this.serialize(repository, () => this.applyNow(repository, desired));
  }

  private async applyNow(repository: string, desired: DesiredDeployment): Promise<void> {
    const { records, stopTimeoutSeconds } = this.options;
    const current = await this.containersOf(repository);
    if (desired.state === 'stopped' || desired.digest === null) {
      this.options.logs?.unfollow(repository);
      for (const container of current) await this.engine.remove(container.Id, stopTimeoutSeconds);
      await records.save(repository, desired, null);
      await records.setPort(repository, null);
      return;
    }
    const config = this.configKey(desired);
    const live = current.find((c) => c.State === 'running' && c.Labels?.[LABELS.config] === config);
    let port: number | null;
    if (live) {
      port = live.Ports?.[0]?.host_port ?? null;
      // Adopted (after a platform restart): its output from now on, not its whole past again.
      this.options.logs?.follow(repository, live.Id, rfc3339());
    } else {
      try {
        const started = await this.startContainer(repository, desired, config);
        port = started.port;
        this.options.logs?.follow(repository, started.id);
      } catch (error) {
        // The earlier container (if any) keeps serving; the failure is what `actual` reports.
        const message = error instanceof Error ? error.message : String(error);
        await records.save(repository, desired, message);
        if (!current.some((c) => c.State === 'running')) await records.setPort(repository, null);
        throw error;
      }
    }
    // The new one is up (or the right one already ran): every other container of it goes.
    for (const container of current) if (container !== live) await this.engine.remove(container.Id, stopTimeoutSeconds);
    await records.save(repository, desired, null);
    await records.setPort(repository, port);
  }

  /** Volume directories under `<dataDir>/run/volumes/`, bound into named podman volumes the platform labels. */
  private async volumeArgs(repository: string, desired: DesiredDeployment, scope: string): Promise<string[]> {
    const args: string[] = [];
    for (const volume of desired.volumes) {
      const name = `stratus-${scope}-${hash(repository)}-${hash(volume.name)}`;
      if (!(await this.engine.volumeExists(name))) {
        const device = join(this.options.dataDir, 'run', 'volumes', hash(repository, 16), hash(volume.name, 16));
        await mkdir(device, { recursive: true });
        await this.engine.createVolume(name, device, { [LABELS.scope]: scope, [LABELS.repository]: repository });
      }
      args.push('--volume', `${name}:${volume.target}:${volume.mode === 'ro' ? 'ro' : 'rw'}`);
    }
    return args;
  }

  /** Runs a new container and waits until it is up; resolves its id and loopback port (null: none). */
  private async startContainer(
    repository: string,
    desired: DesiredDeployment,
    config: string,
  ): Promise<{ id: string; port: number | null }> {
    const { dataDir, memoryBytes, cpus, restart, stopTimeoutSeconds } = this.options;
    const scope = await this.scope();
    const work = join(dataDir, 'run', 'work');
    await mkdir(work, { recursive: true, mode: 0o700 });
    const image = await loadImage(
      this.engine,
      this.options.repository,
      this.options.blobs,
      repository,
      desired.digest!,
      work,
    );
    for (const variable of desired.env)
      if (/[\r\n]/.test(variable.desired_value))
        throw new Error(`env ${variable.key}: a value with a line break cannot be passed to the engine`);
    const port = servedPort(desired, image.exposedPort);
    const name = `stratus-${scope}-${slug(repository)}-${randomBytes(3).toString('hex')}`;
    // Values go through a file (mode 0600, removed at once), never the engine's command line.
    const envFile = join(work, `env-${randomBytes(8).toString('hex')}`);
    await writeFile(envFile, desired.env.map((e) => `${e.key}=${e.desired_value}\n`).join(''), { mode: 0o600 });
    const labels: Record<string, string> = {
      [LABELS.scope]: scope,
      [LABELS.repository]: repository,
      [LABELS.reference]: desired.reference ?? '',
      [LABELS.digest]: desired.digest!,
      [LABELS.config]: config,
      [LABELS.appliedAt]: rfc3339(),
    };
    const args = [
      '--name',
      name,
      ...Object.entries(labels).flatMap(([k, v]) => ['--label', `${k}=${v}`]),
      '--env-file',
      envFile,
      ...(await this.volumeArgs(repository, desired, scope)),
      '--memory',
      String(memoryBytes),
      '--cpus',
      String(cpus),
      '--restart',
      restart,
      '--stop-timeout',
      String(stopTimeoutSeconds),
      // Loopback only: the platform reaches containers through the host's loopback, never the engine's bridge.
      ...(port === null ? [] : ['--publish', `127.0.0.1::${port}`]),
    ];
    let id: string;
    try {
      id = await this.engine.runDetached(args, image.id);
    } catch (error) {
      await this.engine.remove(name, 0).catch(() => undefined);
      throw error instanceof EngineError ? new Error(`the engine could not start it: ${error.message}`) : error;
    } finally {
      await rm(envFile, { force: true });
    }
    try {
      return { id, port: await this.waitUntilUp(id, port) };
    } catch (error) {
      const output = await this.engine.tail(id, 20);
      await this.engine.remove(id, 0).catch(() => undefined);
      const detail = output ? ` (its last output: ${output.split('\n').slice(-5).join(' | ')})` : '';
      throw new Error(`${(error as Error).message}${detail}`);
    }
  }

  /**
   * Until the container runs and, when it serves a port, that port accepts a connection on
   * loopback; resolves the published port (null without one).
   */
  private async waitUntilUp(id: string, port: number | null): Promise<number | null> {
    const deadline = Date.now() + this.options.startTimeoutMs;
    // Without a port, staying up this long is the evidence it started.
    const settle = Math.min(1000, this.options.startTimeoutMs);
    let runningSince: number | null = null;
    for (;;) {
      const container = await this.engine.container(id);
      if (!container) throw new Error('the container disappeared while starting');
      if (container.State === 'exited' || container.State === 'stopped')
        throw new Error(`the container exited with code ${container.ExitCode} while starting`);
      if (container.State === 'running') {
        runningSince ??= Date.now();
        if (port === null) {
          if (Date.now() - runningSince >= settle) return null;
        } else {
          const published = container.Ports?.find((p) => p.container_port === port)?.host_port;
          if (published && (await canConnect(published))) return published;
        }
      }
      if (Date.now() > deadline)
        throw new Error(
          port === null
            ? `the container was not running within ${this.options.startTimeoutMs / 1000} s`
            : `the container did not accept connections on port ${port} within ${this.options.startTimeoutMs / 1000} s`,
        );
      await delay(200);
    }
  }

  async status(repository: string): Promise<ActualState | null> {
    const record = await this.options.records.find(repository);
    try {
      return this.actual(record, await this.containersOf(repository));
    } catch (error) {
      return this.engineSilent(record, error);
    }
  }

  async statuses(repositories: string[]): Promise<Map<string, ActualState | null>> {
    const records = await Promise.all(repositories.map((r) => this.options.records.find(r)));
    const out = new Map<string, ActualState | null>();
    let containers: EngineContainer[];
    try {
      containers = await this.engine.containers({ [LABELS.scope]: await this.scope() });
    } catch (error) {
      repositories.forEach((r, i) => out.set(r, this.engineSilent(records[i] ?? null, error)));
      return out;
    }
    repositories.forEach((r, i) =>
      out.set(
        r,
        this.actual(
          records[i] ?? null,
          containers.filter((c) => c.Labels?.[LABELS.repository] === r),
        ),
      ),
    );
    return out;
  }

  /** When the engine does not answer, the state cannot be told: `unknown`, with why. */
  private engineSilent(record: DriverRecord | null, error: unknown): ActualState | null {
    if (!record) return null;
    return {
      state: 'unknown',
      reference: record.reference,
      digest: record.digest,
      applied_at: record.applied_at,
      message: `the engine did not answer: ${(error as Error).message}`,
    };
  }

  /** What the engine shows of one repository's containers: the newest running one, else the newest. */
  private actual(record: DriverRecord | null, containers: EngineContainer[]): ActualState | null {
    const newest = [...containers].sort((a, b) => b.Created - a.Created);
    const shown = newest.find((c) => c.State === 'running') ?? newest[0];
    const message = record?.message ? { message: record.message } : {};
    if (!shown) {
      if (!record) return null;
      const failed = record.state === 'running' && record.message !== null;
      return {
        state: failed ? 'failed' : 'stopped',
        reference: record.reference,
        digest: record.digest,
        applied_at: record.applied_at,
        ...message,
      };
    }
    const state = engineState(shown);
    const labels = shown.Labels ?? {};
    return {
      state,
      reference: labels[LABELS.reference] || null,
      digest: labels[LABELS.digest] || null,
      applied_at: labels[LABELS.appliedAt] ?? record?.applied_at ?? '',
      ...(state === 'exited' ? { exit_code: shown.ExitCode } : {}),
      ...message,
    };
  }

  /** The loopback port a running repository's container is published on, or null (traffic routing). */
  async publishedPort(repository: string): Promise<number | null> {
    const running = (await this.containersOf(repository)).find((c) => c.State === 'running');
    return running?.Ports?.[0]?.host_port ?? null;
  }

  async ready(): Promise<boolean> {
    const now = Date.now();
    if (this.readyCache && now - this.readyCache.at < 5000) return this.readyCache.ok;
    const ok = await this.engine.version().then(
      () => true,
      () => false,
    );
    this.readyCache = { at: now, ok };
    return ok;
  }

  /**
   * Makes the engine follow the stored desired states: a repository that should run and does not
   * is started; a container of this platform whose repository should not run is removed.
   * Failures are logged, not thrown (one bad repository must not keep the others down).
   */
  async reconcile(): Promise<void> {
    const { logger, stopTimeoutSeconds } = this.options;
    const repositories = await this.options.repository.allRepositories();
    const running = new Map(repositories.filter((r) => r.desired.state === 'running').map((r) => [r.name, r]));
    const containers = await this.engine.containers({ [LABELS.scope]: await this.scope() });
    for (const container of containers) {
      const repository = container.Labels?.[LABELS.repository] ?? '';
      if (this.closed || running.has(repository)) continue;
      await this.serialize(repository, () => this.engine.remove(container.Id, stopTimeoutSeconds)).catch(
        (error: unknown) => logger.warn({ err: error, repository }, 'removing a container nothing wants failed'),
      );
    }
    for (const row of running.values()) {
      if (this.closed) return;
      await this.apply(row.name, { ...row.desired, env: row.env, volumes: row.volumes }).catch((error: unknown) =>
        logger.warn({ err: error, repository: row.name }, 'starting a repository that should run failed'),
      );
    }
  }

  async close(): Promise<void> {
    // Containers outlive the platform process (the engine runs them); only pending work is awaited.
    this.closed = true;
    await Promise.all([...this.queues.values()]);
    this.options.logs?.close();
  }
}
