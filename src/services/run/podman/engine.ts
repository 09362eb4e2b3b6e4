// The podman command line, typed: the only place the podman driver runs the engine. Every call
// has a time limit, and a failure carries the engine's own message (its last stderr line).
import { execFile } from 'node:child_process';

/** A container as `podman ps --format json` lists it (the members the driver reads). */
export interface EngineContainer {
  Id: string;
  Names: string[];
  State: string;
  ExitCode: number;
  Labels: Record<string, string> | null;
  Created: number;
  Ports: { host_ip: string; container_port: number; host_port: number; protocol: string }[] | null;
}

/** An image as `podman image inspect` reports it (the members the driver reads). */
export interface EngineImage {
  Id: string;
  Config: { ExposedPorts?: Record<string, unknown> | null };
}

export class EngineError extends Error {
  constructor(
    message: string,
    /** The command's exit code, when it ran and failed. */
    readonly exitCode: number | null,
  ) {
    super(message);
    this.name = 'EngineError';
  }
}

export interface PodmanEngineOptions {
  /** The binary (setting `RUN_PODMAN`). */
  binary: string;
  /** The environment podman runs with (CONTAINERS_CONF among it). */
  env?: NodeJS.ProcessEnv;
  /** Time limit of one call, in milliseconds; default 120 s (an image load may take long). */
  timeoutMs?: number;
}

/** The engine's message in a failed call's output: its last non-empty stderr line, without podman's `Error: `. */
function engineMessage(stderr: string, fallback: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !/^time="[^"]*" level=(info|warning|debug)/.test(l));
  const last = lines.at(-1);
  return last ? last.replace(/^Error: /, '') : fallback;
}

export class PodmanEngine {
  private readonly env: NodeJS.ProcessEnv;
  private readonly timeoutMs: number;

  constructor(private readonly options: PodmanEngineOptions) {
    this.env = options.env ?? process.env;
    this.timeoutMs = options.timeoutMs ?? 120_000;
  }

  /** Runs podman with `args`; resolves its stdout, rejects with an EngineError carrying the engine's message. */
  run(args: string[], timeoutMs = this.timeoutMs): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(
        this.options.binary,
        args,
        { env: this.env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, killSignal: 'SIGKILL' },
        (error, stdout, stderr) => {
          if (!error) return resolve(stdout);
          const code = typeof error.code === 'number' ? error.code : null;
          const reason = error.killed
            ? `podman ${args[0]} did not finish within ${Math.round(timeoutMs / 1000)} s`
            : engineMessage(stderr, error.message);
          reject(new EngineError(reason, code));
        },
      );
    });
  }

  async version(): Promise<string> {
    return (await this.run(['version', '--format', '{{.Client.Version}}'], 15_000)).trim();
  }

  /** Containers with every one of `labels` (name=value), running or not. */
  async containers(labels: Record<string, string>): Promise<EngineContainer[]> {
    const filters = Object.entries(labels).flatMap(([k, v]) => ['--filter', `label=${k}=${v}`]);
    const out = await this.run(['ps', '--all', '--format', 'json', ...filters], 30_000);
    const parsed = JSON.parse(out.trim() || '[]') as EngineContainer[] | null;
    return parsed ?? [];
  }

  /** One container by id, or null when the engine has none of that id. */
  async container(id: string): Promise<EngineContainer | null> {
    const out = await this.run(['ps', '--all', '--format', 'json', '--filter', `id=${id}`], 30_000);
    const parsed = JSON.parse(out.trim() || '[]') as EngineContainer[] | null;
    return parsed?.[0] ?? null;
  }

  /** The image, or null when the engine does not have it. */
  async image(id: string): Promise<EngineImage | null> {
    try {
      const out = await this.run(['image', 'inspect', '--format', 'json', id], 30_000);
      return (JSON.parse(out) as EngineImage[])[0] ?? null;
    } catch (error) {
      if (error instanceof EngineError && /image not known|no such image/i.test(error.message)) return null;
      throw error;
    }
  }

  /** Loads an image from a `dir:` transport directory; resolves the image id. */
  async pullDirectory(path: string): Promise<string> {
    return (await this.run(['pull', '--quiet', `dir:${path}`])).trim();
  }

  async volumeExists(name: string): Promise<boolean> {
    try {
      await this.run(['volume', 'exists', name], 15_000);
      return true;
    } catch (error) {
      if (error instanceof EngineError && error.exitCode === 1) return false;
      throw error;
    }
  }

  /** A named volume bound to `device`, a directory the platform owns. */
  async createVolume(name: string, device: string, labels: Record<string, string>): Promise<void> {
    const labelArgs = Object.entries(labels).flatMap(([k, v]) => ['--label', `${k}=${v}`]);
    await this.run(
      ['volume', 'create', ...labelArgs, '--opt', 'type=none', '--opt', 'o=bind', '--opt', `device=${device}`, name],
      30_000,
    );
  }

  /** `podman run --detach` with `args` before the image; resolves the container id. */
  async runDetached(args: string[], image: string): Promise<string> {
    return (await this.run(['run', '--detach', '--pull', 'never', ...args, image], 120_000)).trim();
  }

  /** Stops (SIGTERM, then SIGKILL after `stopSeconds`) and removes a container; a missing one is fine. */
  async remove(id: string, stopSeconds: number): Promise<void> {
    try {
      await this.run(['rm', '--force', '--time', String(stopSeconds), id], (stopSeconds + 60) * 1000);
    } catch (error) {
      if (error instanceof EngineError && /no such container/i.test(error.message)) return;
      throw error;
    }
  }

  /** The last `lines` lines a container wrote (stdout and stderr), for a failure's message. */
  async tail(id: string, lines: number): Promise<string> {
    try {
      return await new Promise((resolve) => {
        execFile(
          this.options.binary,
          ['logs', '--tail', String(lines), id],
          { env: this.env, timeout: 15_000, maxBuffer: 1024 * 1024 },
          (_error, stdout, stderr) => resolve(`${stdout}${stderr}`.trim()),
        );
      });
    } catch {
      return '';
    }
  }
}
