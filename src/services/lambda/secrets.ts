import type { Settings } from '../../config.ts';
import { SealingKey, secretsKeySource, UnsealError } from '../../core/sealing.ts';

// The key file and sealing are shared with the scheduler's webhook secrets (src/core/sealing.ts).
export { keyFingerprint, readOrCreateKeyFile, SECRETS_KEY_FILE } from '../../core/sealing.ts';

/**
 * Lambda secrets at rest (README: Environment and secrets): AES-256-GCM with a fresh 12-byte IV
 * per write and the lambda's id as additional authenticated data, so a sealed value cannot be
 * moved to another lambda. The key is the setting `LAMBDA_SECRETS_KEY`, else the key file
 * `<dataDir>/lambda-secrets.key`, created on first need. Each sealed value names the key's
 * fingerprint, so a value sealed under another key is reported as such instead of as damage.
 */

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

/** Seals and opens the secrets of lambdas under one key. */
export class LambdaSecrets {
  private readonly sealing: SealingKey;

  /** `key`: the key, or a function that gives it on first need (the key file is made then). */
  constructor(key: Buffer | (() => Buffer)) {
    this.sealing = new SealingKey(key);
  }

  /**
   * The key of these settings: `lambdaSecretsKey`, else the key file in `dataDir`, read or created
   * on first need; `onCreated` is told when this process created the file.
   */
  static fromSettings(
    settings: Pick<Settings, 'lambdaSecretsKey' | 'dataDir'>,
    onCreated: (path: string) => void = () => {},
  ): LambdaSecrets {
    return new LambdaSecrets(secretsKeySource(settings, onCreated));
  }

  /** The values, encrypted for lambda `lambdaId` only (its id is the authenticated data). */
  seal(lambdaId: string, values: Record<string, string>): string {
    return this.sealing.seal(lambdaId, JSON.stringify(values));
  }

  /**
   * The values sealed for lambda `lambdaId`. Throws SecretsKeyMismatch when they were sealed under
   * another key, SecretsUnreadable when they are damaged, changed or sealed for another lambda.
   */
  open(lambdaId: string, sealed: string): Record<string, string> {
    let plain: string;
    try {
      plain = this.sealing.open(lambdaId, sealed);
    } catch (error) {
      if (!(error instanceof UnsealError)) throw error;
      if (error.problem.kind === 'key_mismatch') throw new SecretsKeyMismatch(lambdaId);
      throw new SecretsUnreadable(
        lambdaId,
        error.problem.reason === 'changed'
          ? 'they were changed, or were sealed for another lambda'
          : error.problem.reason,
      );
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
