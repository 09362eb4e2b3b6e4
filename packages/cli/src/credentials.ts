import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/** What `stratus login` keeps: the platform's base URL and one credential for it. */
export interface Credentials {
  url: string;
  /** A session token (bearer), from `stratus login`. */
  token?: string;
  /** An API key pair, from `stratus login --api-key … --secret …`. */
  apiKey?: string;
  secret?: string;
  /** The signed-in user's email, for `stratus whoami` without a round trip. */
  email?: string;
}

/**
 * The credentials file: `$STRATUS_CONFIG_DIR`, else `$XDG_CONFIG_HOME/stratus`, else
 * `%APPDATA%\stratus` on Windows, else `~/.config/stratus`; `credentials.json` in it.
 */
export function credentialsPath(env: NodeJS.ProcessEnv = process.env, platform = process.platform): string {
  const dir =
    env.STRATUS_CONFIG_DIR ??
    (env.XDG_CONFIG_HOME ? join(env.XDG_CONFIG_HOME, 'stratus') : undefined) ??
    (platform === 'win32' && env.APPDATA ? join(env.APPDATA, 'stratus') : undefined) ??
    join(homedir(), '.config', 'stratus');
  return join(dir, 'credentials.json');
}

/** The stored credentials, or null when none are stored. A file that is not ours is an error, not "signed out". */
export async function readCredentials(path = credentialsPath()): Promise<Credentials | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  const value = JSON.parse(text) as Partial<Credentials>;
  if (typeof value.url !== 'string') throw new Error(`${path} holds no platform URL; run stratus login again`);
  return value as Credentials;
}

/**
 * Writes the credentials readable by the user alone (0600, the folder 0700): written to a
 * temporary file created with that mode and renamed over the old one, so no other user can
 * read a token even for a moment, and a crash leaves the old file or the new one.
 */
export async function writeCredentials(credentials: Credentials, path = credentialsPath()): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
  // The mode given to writeFile is masked by the umask; chmod is not.
  await chmod(temporary, 0o600);
  await rename(temporary, path);
}

export async function removeCredentials(path = credentialsPath()): Promise<void> {
  await rm(path, { force: true });
}
