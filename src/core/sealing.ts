import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * Values sealed at rest with the platform's secrets key (lambda secrets, scheduler webhook
 * secrets): AES-256-GCM with a fresh 12-byte IV per write and additional authenticated data that
 * names what the value belongs to, so a sealed value cannot be moved to another owner. Each sealed
 * value names the key's fingerprint, so a value sealed under another key is reported as such
 * instead of as damage. Which key a service uses (a setting, else a key file) is the service's
 * choice; this module only reads or creates a key file at a path it is given.
 */

export const SEALING_KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const ALGORITHM = 'aes-256-gcm';
/** Sealed form: `v1.<fingerprint hex>.<iv base64url>.<ciphertext and tag base64url>`. */
const VERSION = 'v1';

/** The first 8 bytes of the key's SHA-256, in hex: names a key without revealing it. */
export function keyFingerprint(key: Buffer): string {
  return createHash('sha256').update(key).digest().subarray(0, 8).toString('hex');
}

/** The data directory's key file, used when `LAMBDA_SECRETS_KEY` is unset. */
export const SECRETS_KEY_FILE = 'lambda-secrets.key';

/**
 * The key the settings give (`LAMBDA_SECRETS_KEY`), else a reader of the data directory's key
 * file that makes it on first need (`onCreated` is told its path then).
 */
export function secretsKeySource(
  settings: { lambdaSecretsKey: Buffer | undefined; dataDir: string },
  onCreated: (path: string) => void = () => {},
): Buffer | (() => Buffer) {
  if (settings.lambdaSecretsKey) return settings.lambdaSecretsKey;
  const path = join(settings.dataDir, SECRETS_KEY_FILE);
  return () => {
    const { key, created } = readOrCreateKeyFile(path);
    if (created) onCreated(path);
    return key;
  };
}

/**
 * The key in `path`, created first when there is none: 32 random bytes written to a temporary
 * file of mode 0600 and linked into place, which fails rather than overwrites when another process
 * created it meanwhile, so every process on one data directory reads the same key.
 * `created` tells whether this call made it.
 */
export function readOrCreateKeyFile(path: string): { key: Buffer; created: boolean } {
  const existing = readKeyFile(path);
  if (existing) return { key: existing, created: false };
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  let created = false;
  const fd = openSync(temporary, 'wx', 0o600);
  try {
    writeSync(fd, randomBytes(SEALING_KEY_BYTES));
    fsyncSync(fd);
    closeSync(fd);
    try {
      linkSync(temporary, path);
      created = true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  } finally {
    try {
      unlinkSync(temporary);
    } catch {
      // Already gone: nothing to clean up.
    }
  }
  const key = readKeyFile(path);
  if (!key) throw new Error(`${path} could not be created`);
  return { key, created };
}

/** The key in the file, or null when there is no file; a file that is not 32 bytes is an error. */
function readKeyFile(path: string): Buffer | null {
  let content: Buffer;
  try {
    content = readFileSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  if (content.length !== SEALING_KEY_BYTES)
    throw new Error(
      `${path} must hold exactly ${SEALING_KEY_BYTES} bytes (a lambda secrets key); it holds ${content.length}`,
    );
  return content;
}

/** Why a sealed value cannot be opened: sealed under another key, or damaged / changed / someone else's. */
export type UnsealProblem = { kind: 'key_mismatch' } | { kind: 'unreadable'; reason: string };

/** Thrown by `SealingKey.open`; the caller words it for its own resource. */
export class UnsealError extends Error {
  override readonly name = 'UnsealError';
  constructor(readonly problem: UnsealProblem) {
    super(problem.kind === 'key_mismatch' ? 'sealed under another key' : problem.reason);
  }
}

/** Seals and opens text under one key, each value bound to its `aad` (what it belongs to). */
export class SealingKey {
  private loaded: { key: Buffer; fingerprint: string } | undefined;

  /** `key`: the key, or a function that gives it on first need (a key file is made then). */
  constructor(private readonly key: Buffer | (() => Buffer)) {}

  private current(): { key: Buffer; fingerprint: string } {
    if (!this.loaded) {
      const key = typeof this.key === 'function' ? this.key() : this.key;
      if (key.length !== SEALING_KEY_BYTES)
        throw new Error(`a lambda secrets key has ${SEALING_KEY_BYTES} bytes, not ${key.length}`);
      this.loaded = { key, fingerprint: keyFingerprint(key) };
    }
    return this.loaded;
  }

  /** `plain`, encrypted and bound to `aad`. */
  seal(aad: string, plain: string): string {
    const { key, fingerprint } = this.current();
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(aad, 'utf8'));
    const sealed = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return [VERSION, fingerprint, iv.toString('base64url'), sealed.toString('base64url')].join('.');
  }

  /** The text sealed for `aad`; throws UnsealError. */
  open(aad: string, sealed: string): string {
    const parts = sealed.split('.');
    if (parts.length !== 4 || parts[0] !== VERSION)
      throw new UnsealError({ kind: 'unreadable', reason: 'not in a known format' });
    const [, fingerprint, ivText, bodyText] = parts as [string, string, string, string];
    const { key, fingerprint: ours } = this.current();
    if (fingerprint !== ours) throw new UnsealError({ kind: 'key_mismatch' });
    const iv = Buffer.from(ivText, 'base64url');
    const body = Buffer.from(bodyText, 'base64url');
    if (iv.length !== IV_BYTES || body.length < TAG_BYTES)
      throw new UnsealError({ kind: 'unreadable', reason: 'not in a known format' });
    try {
      const decipher = createDecipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(aad, 'utf8'));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      return Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]).toString(
        'utf8',
      );
    } catch {
      throw new UnsealError({ kind: 'unreadable', reason: 'changed' });
    }
  }
}
