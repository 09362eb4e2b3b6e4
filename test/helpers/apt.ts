import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Installs a Debian package a test needs when `present()` says it is missing (CI runs as root with
 * Debian's registry reachable). Test files run in parallel, so another one may hold apt's lock:
 * apt waits for it, and a failed try refreshes the package lists and tries again.
 */
export async function aptInstall(pkg: string, present: () => boolean): Promise<void> {
  if (present()) return;
  const options = {
    timeout: 15 * 60_000,
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  };
  const lock = ['-o', 'DPkg::Lock::Timeout=600'];
  let lastError: unknown;
  for (let attempt = 0; attempt < 4 && !present(); attempt++) {
    try {
      await run('apt-get', [...lock, 'install', '-y', '--no-install-recommends', pkg], options);
    } catch (error) {
      lastError = error;
      await run('apt-get', [...lock, 'update'], options).catch((update: unknown) => (lastError = update));
      await new Promise((resolve) => setTimeout(resolve, 2_000 * (attempt + 1)));
    }
  }
  if (!present())
    throw new Error(
      `apt-get install ${pkg} did not install it: ${lastError instanceof Error ? lastError.message : String(lastError)}`,
    );
}
