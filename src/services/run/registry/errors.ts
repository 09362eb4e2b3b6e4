/**
 * Registry errors travel as RegistryError and leave in the OCI form
 * `{"errors":[{"code","message","detail"}]}` (run.md §6.2), not the platform envelope.
 */
export type RegistryErrorCode =
  | 'NAME_INVALID'
  | 'NAME_UNKNOWN'
  | 'DIGEST_INVALID'
  | 'MANIFEST_INVALID'
  | 'MANIFEST_BLOB_UNKNOWN'
  | 'UNAUTHORIZED'
  | 'DENIED'
  | 'BLOB_UNKNOWN'
  | 'MANIFEST_UNKNOWN'
  | 'BLOB_UPLOAD_UNKNOWN'
  | 'BLOB_UPLOAD_INVALID'
  | 'UNSUPPORTED'
  | 'SIZE_INVALID'
  | 'UNAVAILABLE';

export class RegistryError extends Error {
  constructor(
    readonly status: number,
    readonly code: RegistryErrorCode,
    message: string,
    readonly detail: unknown = null,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'RegistryError';
  }
}

export function registryErrorBody(code: string, message: string, detail: unknown = null): { errors: { code: string; message: string; detail: unknown }[] } {
  return { errors: [{ code, message, detail }] };
}

export const CHALLENGE = 'Basic realm="Stratus Registry"';

export const unauthorizedRegistry = () => new RegistryError(401, 'UNAUTHORIZED', 'authentication required', null, { 'www-authenticate': CHALLENGE });
export const nameInvalid = (name: string) => new RegistryError(400, 'NAME_INVALID', `invalid repository name '${name.slice(0, 300)}'`, { name: name.slice(0, 300) });
export const denied = (name: string) => new RegistryError(403, 'DENIED', `repository '${name}' belongs to another user`, { name });
export const digestInvalid = (message: string, detail: unknown = null) => new RegistryError(400, 'DIGEST_INVALID', message, detail);
export const manifestInvalid = (message: string) => new RegistryError(400, 'MANIFEST_INVALID', message);
export const unsupported = (what: string) => new RegistryError(405, 'UNSUPPORTED', `${what} is not supported by this push-only registry`);
export const sizeInvalid = (message: string) => new RegistryError(413, 'SIZE_INVALID', message);
export const uploadUnknown = () => new RegistryError(404, 'BLOB_UPLOAD_UNKNOWN', 'blob upload unknown to registry');
export const unavailable = (message: string) => new RegistryError(503, 'UNAVAILABLE', message);
