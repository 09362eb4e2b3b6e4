import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Settings } from '../../config.ts';

/**
 * Lambda secrets at rest (README: Environment and secrets): AES-256-GCM with a fresh 12-byte IV
 * per write and the lambda's id as additional authenticated data, so a sealed value cannot be
 * moved to another lambda. The key is the setting `LAMBDA_SECRETS_KEY`, else the key file
 * `<dataDir>/lambda-secrets.key`, created on first need. Each sealed value names the key's
 * fingerprint, so a value sealed under another key is reported as such instead of as damage.
 */

/** The key file's name in the data directory, used when `LAMBDA_SECRETS_KEY` is unset. */
export const SECRETS_KEY_FILE = 'lambda-secrets.key';

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const ALGORITHM = 'aes-256-gcm';
/** Sealed form: `v1.<fingerprint hex>.<iv base64url>.<ciphertext and tag base64url>`. */
const VERSION = 'v1';

/** The secrets of a lambda were sealed under a key this process does not have. */
export class SecretsKeyMismatch extends Error {
  override readonly name = 'SecretsKeyMismatch';
  constructor(readonly lambdaId: string) {
    super(
      `the secrets of lambda ${lambdaId} were encrypted with another key: every instance needs the same LAMBDA_SECRETS_KEY`,
    );
  }
}

/** The sealed secrets of a lambda are damaged, were changed, or belong to another lambda. */
export class SecretsUnreadable extends Error {
  override readonly name = 'SecretsUnreadable';
  constructor(
    readonly lambdaId: string,
    reason: string,
  ) {
    super(`the secrets of lambda ${lambdaId} cannot be decrypted: ${reason}`);
  }
}

/** The first 8 bytes of the key's SHA-256, in hex: names a key without revealing it. */
export function keyFingerprint(key: Buffer): string {
  return createHash('sha256').update(key).digest().subarray(0, 8).toString('hex');
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
    writeSync(fd, randomBytes(KEY_BYTES));
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
  if (content.length !== KEY_BYTES)
    throw new Error(`${path} must hold exactly ${KEY_BYTES} bytes (a lambda secrets key); it holds ${content.length}`);
  return content;
}

/** Seals and opens the secrets of lambdas under one key. */
export class LambdaSecrets {
  private loaded: { key: Buffer; fingerprint: string } | undefined;

  /** `key`: the key, or a function that gives it on first need (the key file is made then). */
  constructor(private readonly key: Buffer | (() => Buffer)) {}

  /**
   * The key of these settings: `lambdaSecretsKey`, else the key file in `dataDir`, read or created
   * on first need; `onCreated` is told when this process created the file.
   */
  static fromSettings(
    settings: Pick<Settings, 'lambdaSecretsKey' | 'dataDir'>,
    onCreated: (path: string) => void = () => {},
  ): LambdaSecrets {
    const configured = settings.lambdaSecretsKey;
    if (configured) return new LambdaSecrets(configured);
    const path = join(settings.dataDir, SECRETS_KEY_FILE);
    return new LambdaSecrets(() => {
      const { key, created } = readOrCreateKeyFile(path);
      if (created) onCreated(path);
      return key;
    });
  }

  private current(): { key: Buffer; fingerprint: string } {
    if (!this.loaded) {
      const key = typeof this.key === 'function' ? this.key() : this.key;
      if (key.length !== KEY_BYTES) throw new Error(`a lambda secrets key has ${KEY_BYTES} bytes, not ${key.length}`);
      this.loaded = { key, fingerprint: keyFingerprint(key) };
    }
    return this.loaded;
  }

  /** The values, encrypted for lambda `lambdaId` only. */
  seal(lambdaId: string, values: Record<string, string>): string {
    const { key, fingerprint } = this.current();
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(lambdaId, 'utf8'));
    const sealed = Buffer.concat([cipher.update(JSON.stringify(values), 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return [VERSION, fingerprint, iv.toString('base64url'), sealed.toString('base64url')].join('.');
  }

  /**
   * The values sealed for lambda `lambdaId`. Throws SecretsKeyMismatch when they were sealed under
   * another key, SecretsUnreadable when they are damaged, changed or sealed for another lambda.
   */
  open(lambdaId: string, sealed: string): Record<string, string> {
    const parts = sealed.split('.');
    if (parts.length !== 4 || parts[0] !== VERSION) throw new SecretsUnreadable(lambdaId, 'not in a known format');
    const [, fingerprint, ivText, bodyText] = parts as [string, string, string, string];
    const { key, fingerprint: ours } = this.current();
    if (fingerprint !== ours) throw new SecretsKeyMismatch(lambdaId);
    const iv = Buffer.from(ivText, 'base64url');
    const body = Buffer.from(bodyText, 'base64url');
    if (iv.length !== IV_BYTES || body.length < TAG_BYTES)
      throw new SecretsUnreadable(lambdaId, 'not in a known format');
    let plain: string;
    try {
      const decipher = createDecipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(lambdaId, 'utf8'));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      plain = Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]).toString(
        'utf8',
      );
    } catch {
      throw new SecretsUnreadable(lambdaId, 'they were changed, or were sealed for another lambda');
    }
    let values: unknown;
    try {
      values = JSON.parse(plain);
    } catch {
      throw new SecretsUnreadable(lambdaId, 'not in a known format');
    }
    if (
      typeof values !== 'object' ||
      values === null ||
      Array.isArray(values) ||
      !Object.values(values).every((v) => typeof v === 'string')
    )
      throw new SecretsUnreadable(lambdaId, 'not in a known format');
    return values as Record<string, string>;
  }
}
