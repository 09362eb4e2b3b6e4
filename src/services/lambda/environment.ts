import { createHash } from 'node:crypto';
import { LambdaErrors } from './errors.ts';
import type { Lambda, LambdaRepository, StoredSettings } from './repository.ts';
import { SecretsKeyMismatch, SecretsUnreadable, type LambdaSecrets } from './secrets.ts';

/**
 * A lambda's `env` and `secrets` (README: Environment and secrets): the limits, the merge of a
 * change (RFC 7396 style: a named value is set, null deletes it, unnamed ones are kept) and what
 * an invocation gets (`envFor`). Error messages name a secret, never its value.
 */

/** A name of env or secrets. */
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/** Names in env and secrets together. */
export const MAX_ENV_NAMES = 64;
/** Characters (Unicode code points, as the schemas count them) of one value. */
export const MAX_ENV_VALUE_LENGTH = 5120;
/** Characters of every name and value of env and secrets together. */
export const MAX_ENV_TOTAL_LENGTH = 65_536;

/** A change of env or secrets: a name → its new value, or null to delete it. */
export type EnvChange = Readonly<Record<string, string | null>>;

/** Unicode code points, as Ajv's maxLength counts (a surrogate pair is one). */
function length(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0xdc00 || c > 0xdfff) n++;
  }
  return n;
}

/** A copy with own properties only (`__proto__` is a valid name, kept as a plain member). */
function copy(values: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(values));
}

/** `current` with `change` applied: named values set, null ones deleted, the rest kept. */
export function mergeEnv(
  current: Readonly<Record<string, string>>,
  change: EnvChange | undefined,
): Record<string, string> {
  if (change === undefined) return copy(current);
  const merged = new Map(Object.entries(current));
  for (const [name, value] of Object.entries(change)) {
    if (value === null) merged.delete(name);
    else merged.set(name, value);
  }
  return Object.fromEntries(merged);
}

/** The names and values given for one field: names valid, values within their length. */
function checkGiven(field: 'env' | 'secrets', given: EnvChange | undefined): void {
  for (const [name, value] of Object.entries(given ?? {})) {
    if (!ENV_NAME_PATTERN.test(name)) throw LambdaErrors.envNameInvalid(field, name);
    if (value !== null && length(value) > MAX_ENV_VALUE_LENGTH)
      throw LambdaErrors.envValueTooLong(field, name, MAX_ENV_VALUE_LENGTH);
  }
}

/** The names and values of a change by themselves (the merged result is checked by `applyEnvChange`). */
export function checkEnvChange(change: { env?: EnvChange; secrets?: EnvChange }): void {
  checkGiven('env', change.env);
  checkGiven('secrets', change.secrets);
}

/** The limits on the result: no name in both, at most MAX_ENV_NAMES names and MAX_ENV_TOTAL_LENGTH characters. */
function checkResult(env: Readonly<Record<string, string>>, secrets: Readonly<Record<string, string>>): void {
  for (const name of Object.keys(secrets)) if (Object.hasOwn(env, name)) throw LambdaErrors.envNameInBoth(name);
  const entries = [...Object.entries(env), ...Object.entries(secrets)];
  if (entries.length > MAX_ENV_NAMES) throw LambdaErrors.envTooManyNames(entries.length, MAX_ENV_NAMES);
  const total = entries.reduce((sum, [name, value]) => sum + length(name) + length(value), 0);
  if (total > MAX_ENV_TOTAL_LENGTH) throw LambdaErrors.envTooLarge(total, MAX_ENV_TOTAL_LENGTH);
}

/** The sorted names of `secrets`, as responses list them. */
export function secretNames(secrets: Readonly<Record<string, string>>): string[] {
  return Object.keys(secrets).sort();
}

/** The env and secrets of a new lambda, checked (400 beyond a limit). */
export function checkNewEnv(
  env: Readonly<Record<string, string>> = {},
  secrets: Readonly<Record<string, string>> = {},
): { env: Record<string, string>; secrets: Record<string, string> } {
  checkGiven('env', env);
  checkGiven('secrets', secrets);
  const result = { env: copy(env), secrets: copy(secrets) };
  checkResult(result.env, result.secrets);
  return result;
}

/**
 * A change of a lambda's env and secrets applied to what is stored, checked on the merged result
 * (400 beyond a limit, so nothing changes), the secrets sealed again. The stored secrets are
 * opened only when some of them are kept: a change that names every stored secret works without
 * the old key (README: a lost key).
 */
export function applyEnvChange(
  lambdaId: string,
  stored: StoredSettings,
  change: { env?: EnvChange; secrets?: EnvChange },
  sealer: LambdaSecrets,
): StoredSettings {
  checkEnvChange(change);
  const kept = stored.secret_names.filter((name) => !Object.hasOwn(change.secrets ?? {}, name));
  const current = stored.secrets !== null && kept.length > 0 ? openForChange(sealer, lambdaId, stored.secrets) : {};
  const env = mergeEnv(stored.env, change.env);
  const secrets = mergeEnv(current, change.secrets);
  checkResult(env, secrets);
  // Secrets left as they were keep their sealed value (no new IV for nothing).
  if (change.secrets === undefined || Object.keys(change.secrets).length === 0)
    return { env, secret_names: stored.secret_names, secrets: stored.secrets };
  const names = secretNames(secrets);
  return { env, secret_names: names, secrets: names.length === 0 ? null : sealer.seal(lambdaId, secrets) };
}

function openForChange(sealer: LambdaSecrets, lambdaId: string, sealed: string): Record<string, string> {
  try {
    return sealer.open(lambdaId, sealed);
  } catch (error) {
    if (error instanceof SecretsKeyMismatch || error instanceof SecretsUnreadable)
      throw LambdaErrors.secretsUnreadable(error.message);
    throw error;
  }
}

/** What a lambda's code gets as its environment: its env and its decrypted secrets. */
export class LambdaEnvironment {
  constructor(
    private readonly repository: LambdaRepository,
    private readonly secrets: LambdaSecrets,
  ) {}

  /**
   * The lambda's env merged with its decrypted secrets, a new object on every call. A lambda
   * without secrets reads nothing; otherwise the sealed secrets come from the repository's cache.
   * Throws SecretsKeyMismatch or SecretsUnreadable (secrets.ts) when they cannot be opened.
   */
  async envFor(lambda: Lambda): Promise<Record<string, string>> {
    const { env, secrets } = await this.partsFor(lambda);
    return { ...env, ...secrets };
  }

  /**
   * The env and the decrypted secrets apart (so output can be masked), and a version of both that
   * changes whenever either does (so a warm module context never outlives a change of them).
   */
  async partsFor(
    lambda: Lambda,
  ): Promise<{ env: Record<string, string>; secrets: Record<string, string>; version: string }> {
    const env = copy(lambda.env);
    const sealed = lambda.secret_names.length === 0 ? null : await this.repository.secretsOf(lambda.id);
    const secrets = sealed === null ? {} : copy(this.secrets.open(lambda.id, sealed));
    let version = this.versions.get(lambda);
    if (version === undefined) {
      version = createHash('sha256')
        .update(JSON.stringify(lambda.env))
        .update('\n')
        .update(sealed ?? '')
        .digest('base64url')
        .slice(0, 16);
      this.versions.set(lambda, version);
    }
    return { env, secrets, version };
  }

  /** Versions by lambda object: a change of a lambda makes a new object (the repository's caches). */
  private readonly versions = new WeakMap<Lambda, string>();
}
