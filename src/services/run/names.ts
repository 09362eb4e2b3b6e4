/**
 * The grammar of repository names, tags and digests (service README, "Names"). Shared by the
 * console (where a bad value is a 400 `validation_error`) and the registry (400 `NAME_INVALID` /
 * `DIGEST_INVALID`).
 */

const COMPONENT = /^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$/;
const TAG = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;
const SHA256_DIGEST = /^sha256:[0-9a-f]{64}$/;
/** Any `algorithm:encoded` digest (OCI image spec grammar), to tell "unsupported" from "garbage". */
const ANY_DIGEST = /^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/;

export const MAX_REPOSITORY_NAME = 255;

export function isRepositoryName(name: string): boolean {
  if (name.length === 0 || name.length > MAX_REPOSITORY_NAME) return false;
  return name.split('/').every((component) => COMPONENT.test(component));
}

export function isTag(tag: string): boolean {
  return TAG.test(tag);
}

export function isDigest(digest: string): boolean {
  return SHA256_DIGEST.test(digest);
}

/** Why a digest is refused, or null when it is a well-formed sha256 digest. */
export function digestProblem(digest: string | undefined): string | null {
  if (digest === undefined || digest === '') return 'digest is missing';
  if (SHA256_DIGEST.test(digest)) return null;
  if (ANY_DIGEST.test(digest) && !digest.startsWith('sha256:')) {
    return `digest algorithm '${digest.slice(0, digest.indexOf(':'))}' is not supported; use sha256`;
  }
  return `'${digest}' is not a digest of the form sha256:<64 lower-case hex characters>`;
}

/** `sha256:<hex>` → `<hex>`, the blob store's key. */
export function digestHex(digest: string): string {
  return digest.slice('sha256:'.length);
}

export function toDigest(sha256Hex: string): string {
  return `sha256:${sha256Hex}`;
}
