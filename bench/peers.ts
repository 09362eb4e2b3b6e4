import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { aptInstall } from '../test/helpers/apt.ts';

const run = promisify(execFile);

/** Where a command is on PATH (or in /usr/sbin, where Debian puts daemons), or undefined. */
export function which(command: string): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/bin', '/sbin']) {
    const path = join(dir, command);
    if (dir && existsSync(path)) return path;
  }
  return undefined;
}

/**
 * A peer from Debian: the path of `command`, installing `pkg` with apt-get when it is missing
 * (the benches run as root, as CI does). When it cannot be had, prints one clear line saying so
 * and resolves undefined, and the bench goes on without that peer.
 */
export async function debianPeer(pkg: string, command: string): Promise<string | undefined> {
  try {
    await aptInstall(pkg, () => which(command) !== undefined);
    return which(command);
  } catch (error) {
    console.log(`peer ${pkg} skipped: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
    return undefined;
  }
}

/** The folder npm peers are installed into: out of the project's own dependencies, kept between runs. */
const NPM_PEERS = fileURLToPath(new URL('../node_modules/.cache/stratus-bench-peers', import.meta.url));

/**
 * A peer from npm, installed at an exact version into a folder of its own (not the project's
 * dependencies: nobody who runs Stratus needs workerd). Resolves the package's folder, or prints
 * why it is skipped and resolves undefined.
 */
export async function npmPeer(name: string, version: string): Promise<string | undefined> {
  const dir = join(NPM_PEERS, `${name.replace('/', '+')}@${version}`);
  const installed = join(dir, 'node_modules', name);
  if (existsSync(join(installed, 'package.json'))) return installed;
  try {
    mkdirSync(dir, { recursive: true });
    await run('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', '--no-save', `${name}@${version}`], {
      timeout: 10 * 60_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    if (!existsSync(join(installed, 'package.json'))) throw new Error(`npm installed no ${name}`);
    return installed;
  } catch (error) {
    console.log(
      `peer ${name}@${version} skipped: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`,
    );
    return undefined;
  }
}

/** A peer's version line, for the results (`nginx -v` and the like print it to stderr). */
export function versionOf(command: string, args: string[]): string {
  const done = spawnSync(command, args, { encoding: 'utf8' });
  const text = `${done.stdout ?? ''}${done.stderr ?? ''}`.trim();
  return text ? text.split('\n')[0]! : 'unknown version';
}
