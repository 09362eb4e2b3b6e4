import { execFile, spawnSync, type ExecFileException } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { aptInstall } from './apt.ts';

/**
 * Real containers for tests: podman runs them, buildah builds tiny images from scratch (a static
 * busybox and a few files, so nothing is pulled: the machine reaches no image registry), skopeo
 * pushes them to the platform's registry. Everything runs as root with the engine's default storage
 * (/var/lib/containers/storage), shared by every test process, so names are unique per process and
 * tests remove what they made by label (removeContainers) and tag (removeImage).
 */

/** Every child process gets this long: a hung engine fails the test instead of stalling the run. */
const COMMAND_TIMEOUT_MS = 120_000;

/** busybox-static's binary: linked statically, so it is the whole root filesystem an image needs. */
const BUSYBOX = '/bin/busybox';

/**
 * podman's and buildah's configuration, passed by CONTAINERS_CONF. runc, not crun (the default
 * when both are there): crun fails on this kind of machine (rlimits, hybrid cgroups). Fixed rlimits:
 * as root podman asks for nofile=1048576, above the hard limit of the sandbox the tests run in, and
 * the runtime then fails with "error setting rlimits ... operation not permitted".
 */
const CONTAINERS_CONF = `# Written by test/helpers/podman.ts for the tests' podman and buildah.
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
`;

export type PodmanAvailability = { ok: true; env: NodeJS.ProcessEnv } | { ok: false; reason: string };

/** A child process that failed or timed out; `stderr` is what it said, for callers that tell errors apart. */
export class CommandError extends Error {
  constructor(
    message: string,
    readonly stderr: string,
  ) {
    super(message);
    this.name = 'CommandError';
  }
}

interface Output {
  stdout: string;
  stderr: string;
}

/**
 * Runs `command args` to completion with a timeout. Failures throw a CommandError naming the
 * command and carrying its stderr; `secret` (an argument such as credentials) is masked there.
 */
function exec(command: string, args: string[], env: NodeJS.ProcessEnv, secret?: string): Promise<Output> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { env, timeout: COMMAND_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' },
      (error: ExecFileException | null, stdout: string, stderr: string) => {
        if (!error) return resolve({ stdout, stderr });
        const shown = [command, ...args.map((arg) => (secret !== undefined && arg === secret ? '***' : arg))];
        const how = error.killed
          ? `timed out after ${COMMAND_TIMEOUT_MS / 1000} s`
          : typeof error.code === 'number'
            ? `exited with ${error.code}`
            : error.message;
        const said = (stderr.trim() || stdout.trim()).slice(-4000);
        reject(new CommandError(`${shown.join(' ')}: ${how}${said ? `\n${said}` : ''}`, stderr));
      },
    );
  });
}

/** Runs `podman args` with the helper's timeout and error reporting; resolves with its stdout. */
export async function runPodman(env: NodeJS.ProcessEnv, args: string[]): Promise<string> {
  return (await exec('podman', args, env)).stdout;
}

/** Whether `command --version` runs (the tool is installed and on PATH). */
function runs(command: string): boolean {
  return spawnSync(command, ['--version'], { stdio: 'ignore', timeout: 30_000 }).status === 0;
}

/** Whether `path` is an ELF executable without a program interpreter, that is, statically linked. */
export function isStaticElf(path: string): boolean {
  if (!existsSync(path)) return false;
  const fd = openSync(path, 'r');
  try {
    const header = Buffer.alloc(64);
    if (readSync(fd, header, 0, 64, 0) < 64) return false;
    // "\x7fELF", 64-bit (class 2), little-endian (data 1): the only kind this amd64/arm64 setup meets.
    if (header.readUInt32BE(0) !== 0x7f454c46 || header[4] !== 2 || header[5] !== 1) return false;
    const phoff = Number(header.readBigUInt64LE(0x20));
    const phentsize = header.readUInt16LE(0x36);
    const phnum = header.readUInt16LE(0x38);
    const table = Buffer.alloc(phentsize * phnum);
    if (readSync(fd, table, 0, table.length, phoff) < table.length) return false;
    const PT_INTERP = 3;
    for (let i = 0; i < phnum; i++) if (table.readUInt32LE(i * phentsize) === PT_INTERP) return false;
    return true;
  } finally {
    closeSync(fd);
  }
}

/**
 * Installs the container tools that are missing (as root, from Debian). runc goes first so that
 * podman's `crun | runc` dependency is met by it and crun is not installed. Without recommends, podman
 * brings conmon, containers-common, containernetworking-plugins and iptables: all a rootful podman
 * on the kernel's overlay driver needs (fuse-overlayfs, slirp4netns, uidmap and catatonit serve
 * rootless use, --init or pods).
 */
async function installTools(): Promise<void> {
  await aptInstall('runc', () => runs('runc') || existsSync('/usr/sbin/runc'));
  await aptInstall('podman', () => runs('podman'));
  await aptInstall('buildah', () => runs('buildah'));
  await aptInstall('skopeo', () => runs('skopeo'));
  await aptInstall('busybox-static', () => isStaticElf(BUSYBOX));
}

/**
 * Writes containers.conf into a fixed directory and returns its path. Test files run in parallel
 * processes: each writes a file of its own and renames it into place, so a reader never sees half a
 * file, and one that finds the right content already there writes nothing.
 */
function writeContainersConf(): string {
  const dir = join(tmpdir(), 'stratus-podman');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, 'containers.conf');
  if (existsSync(path) && readFileSync(path, 'utf8') === CONTAINERS_CONF) return path;
  const temporary = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  writeFileSync(temporary, CONTAINERS_CONF);
  renameSync(temporary, path);
  return path;
}

function uniqueSuffix(): string {
  return `${process.pid}-${randomBytes(4).toString('hex')}`;
}

let availability: Promise<PodmanAvailability> | undefined;

/**
 * Whether this machine can run containers, installing podman, runc, buildah, skopeo and
 * busybox-static first when they are missing. ok: the environment to run podman, buildah and skopeo
 * with (CONTAINERS_CONF set). Not ok: the engine's own message, for the test to skip with, when a
 * tiny image cannot be built or run (no permission, no kernel support). A failed installation is
 * not a reason to skip: it throws. Under CI (CI=true) a not-ok is returned all the same: the caller
 * decides whether that fails its test. The outcome is kept for the rest of the process.
 */
export async function podmanAvailable(): Promise<PodmanAvailability> {
  availability ??= checkPodman().catch((error: unknown) => {
    availability = undefined; // an installation that failed may go through on a later call
    throw error;
  });
  return availability;
}

async function checkPodman(): Promise<PodmanAvailability> {
  await installTools();
  const env: NodeJS.ProcessEnv = { ...process.env, CONTAINERS_CONF: writeContainersConf() };
  const suffix = uniqueSuffix();
  const tag = `localhost/stratus-test/podman-check:${suffix}`;
  const label = `stratus.test=podman-check-${suffix}`;
  try {
    await buildBusyboxImage(env, { tag });
    await exec('podman', ['run', '--rm', '--label', label, '--entrypoint', BUSYBOX, tag, 'true'], env);
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  } finally {
    await removeContainers(env, label).catch(() => undefined);
    await removeImage(env, tag).catch(() => undefined);
  }
  return { ok: true, env };
}

/** `tag` as containers-storage names it: buildah puts a name without a registry under localhost/. */
function storageName(tag: string): string {
  const first = tag.split('/')[0] ?? '';
  const hasRegistry = tag.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  return hasRegistry ? tag : `localhost/${tag}`;
}

export interface BusyboxImageOptions {
  /** The image's name in local storage, e.g. `localhost/stratus-test/web:1`. */
  tag: string;
  /** Absolute path in the image → content, e.g. `{ '/www/index.html': 'hello' }`. */
  files?: Record<string, string>;
  /** Default: busybox httpd serving /www on `port` (8000 when not given), in the foreground. */
  entrypoint?: string[];
  /** Declared as the image's exposed port, and the default entrypoint's. */
  port?: number;
  env?: Record<string, string>;
}

/**
 * Builds an image into local containers storage with buildah from scratch: /bin/busybox (static)
 * and `files`, nothing pulled. The working container has a name of its own (several test files may
 * build at once) and is removed whatever happens.
 */
export async function buildBusyboxImage(env: NodeJS.ProcessEnv, options: BusyboxImageOptions): Promise<void> {
  if (!isStaticElf(BUSYBOX)) throw new Error(`${BUSYBOX} is not a static binary: install busybox-static`);
  const stage = mkdtempSync(join(tmpdir(), 'stratus-image-'));
  const name = `stratus-build-${uniqueSuffix()}`;
  try {
    // The staging directory's contents become the image's root: its mode becomes that of `/`.
    chmodSync(stage, 0o755);
    mkdirSync(join(stage, 'bin'));
    copyFileSync(BUSYBOX, join(stage, 'bin', 'busybox'));
    chmodSync(join(stage, 'bin', 'busybox'), 0o755);
    for (const [path, content] of Object.entries(options.files ?? {})) {
      if (!path.startsWith('/') || posix.normalize(path) !== path || path.endsWith('/'))
        throw new Error(`image file paths are absolute and normalized: ${JSON.stringify(path)}`);
      const target = join(stage, path);
      mkdirSync(dirname(target), { recursive: true, mode: 0o755 });
      writeFileSync(target, content, { mode: 0o644 });
    }
    const port = options.port ?? 8000;
    const entrypoint = options.entrypoint ?? [BUSYBOX, 'httpd', '-f', '-p', String(port), '-h', '/www'];
    const config = ['--entrypoint', JSON.stringify(entrypoint)];
    if (options.port !== undefined) config.push('--port', String(options.port));
    for (const [key, value] of Object.entries(options.env ?? {})) config.push('--env', `${key}=${value}`);

    await exec('buildah', ['from', '--name', name, 'scratch'], env);
    try {
      await exec('buildah', ['copy', '--quiet', name, stage, '/'], env);
      await exec('buildah', ['config', ...config, name], env);
      await exec('buildah', ['commit', '--quiet', '--rm', name, storageName(options.tag)], env);
    } catch (error) {
      await exec('buildah', ['rm', name], env).catch(() => undefined);
      throw error;
    }
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

/** Removes an image from local storage (and any container of it); one that is not there is no error. */
export async function removeImage(env: NodeJS.ProcessEnv, tag: string): Promise<void> {
  await exec('podman', ['rmi', '--force', '--ignore', storageName(tag)], env);
}

export interface PushOptions {
  tag: string;
  /** host:port of the registry, on loopback (plain HTTP). */
  registry: string;
  repository: string;
  /** A tag, or a digest (`sha256:…`). */
  reference: string;
  username: string;
  password: string;
  /** The manifest format to push; default: the image's own (OCI for buildah's images). */
  format?: 'v2s2' | 'oci';
}

/**
 * Pushes a local image with skopeo, as test/e2e/run-skopeo.test.ts does: plain HTTP, Basic
 * credentials (for the platform's registry, an API key pair key:secret), and --insecure-policy so
 * no /etc/containers/policy.json is needed.
 */
export async function pushImage(env: NodeJS.ProcessEnv, options: PushOptions): Promise<void> {
  const credentials = `${options.username}:${options.password}`;
  const separator = options.reference.startsWith('sha256:') ? '@' : ':';
  const args = ['--insecure-policy', 'copy', '--quiet', '--dest-tls-verify=false', '--dest-creds', credentials];
  if (options.format) args.push('--format', options.format);
  args.push(
    `containers-storage:${storageName(options.tag)}`,
    `docker://${options.registry}/${options.repository}${separator}${options.reference}`,
  );
  await exec('skopeo', args, env, credentials);
}

/** What podman says of a container or volume that is gone (removed meanwhile by another call). */
const MISSING = /no such (container|volume)|not known|no container with|no volume with/i;

/**
 * Removes every container whose labels match `labelFilter` (`key` or `key=value`), running or
 * not, at once (-t 0), with its anonymous volumes, and then every volume with that label.
 * For a test's after(), so nothing it started stays behind.
 */
export async function removeContainers(env: NodeJS.ProcessEnv, labelFilter: string): Promise<void> {
  const filter = ['--filter', `label=${labelFilter}`];
  const containers = (await exec('podman', ['ps', '--all', '--quiet', ...filter], env)).stdout.split(/\s+/);
  const ids = containers.filter(Boolean);
  if (ids.length > 0)
    await exec('podman', ['rm', '--force', '--ignore', '--volumes', '--time', '0', ...ids], env).catch(ignoreMissing);
  const volumes = (await exec('podman', ['volume', 'ls', '--quiet', ...filter], env)).stdout.split(/\s+/);
  const names = volumes.filter(Boolean);
  if (names.length > 0) await exec('podman', ['volume', 'rm', '--force', ...names], env).catch(ignoreMissing);
}

function ignoreMissing(error: unknown): void {
  if (error instanceof CommandError && MISSING.test(error.stderr)) return;
  throw error;
}
