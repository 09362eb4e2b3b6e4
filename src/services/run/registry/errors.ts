/**
 * Registry errors travel as RegistryError and leave in the OCI form
 * `{"errors":[{"code","message","detail"}]}` (a HEAD's error carries its status only; see the
 * service README, "Registry"), not the platform envelope. The constructors below are every error
 * the registry answers itself; routes/registry/index.ts maps what others throw (a 405, a body too
 * large, an unexpected failure) to the same form.
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

export function registryErrorBody(
  code: string,
  message: string,
  detail: unknown = null,
): { errors: { code: string; message: string; detail: unknown }[] } {
  return { errors: [{ code, message, detail }] };
}

export const CHALLENGE = 'Basic realm="Stratus Registry"';

export const unauthorizedRegistry = () =>
  new RegistryError(401, 'UNAUTHORIZED', 'authentication required', null, { 'www-authenticate': CHALLENGE });
export const nameInvalid = (name: string) =>
  new RegistryError(400, 'NAME_INVALID', `invalid repository name '${name.slice(0, 300)}'`, {
    name: name.slice(0, 300),
  });
export const denied = (name: string) =>
  new RegistryError(403, 'DENIED', `repository '${name}' belongs to another user`, { name });
export const digestInvalid = (message: string, detail: unknown = null) =>
  new RegistryError(400, 'DIGEST_INVALID', message, detail);
export const manifestInvalid = (message: string) => new RegistryError(400, 'MANIFEST_INVALID', message);
export const unsupported = (what: string) =>
  new RegistryError(405, 'UNSUPPORTED', `${what} is not supported by this push-only registry`);
export const sizeInvalid = (message: string) => new RegistryError(413, 'SIZE_INVALID', message);
export const uploadUnknown = () => new RegistryError(404, 'BLOB_UPLOAD_UNKNOWN', 'blob upload unknown to registry');
export const unavailable = (message: string) => new RegistryError(503, 'UNAVAILABLE', message);
export const pathNotDecodable = () => new RegistryError(404, 'NAME_UNKNOWN', 'the path is not valid percent-encoding');
export const noEndpoint = (method: string, path: string) =>
  new RegistryError(404, 'NAME_UNKNOWN', `no registry endpoint for ${method} /v2/${path}`);
export const blobUnknown = (digest: string) =>
  new RegistryError(404, 'BLOB_UNKNOWN', 'blob unknown to registry', { digest });
export const manifestUnknown = (reference: string) =>
  new RegistryError(404, 'MANIFEST_UNKNOWN', 'manifest unknown to registry', { reference });
/** A chunk out of order (416): `headers` give the upload's current `Range` and `Location`. */
export const uploadInvalid = (message: string, size: number, headers: Readonly<Record<string, string>>) =>
  new RegistryError(416, 'BLOB_UPLOAD_INVALID', message, { size }, headers);
export const manifestBlobUnknown = (what: 'blob' | 'manifest', digest: string) =>
  new RegistryError(
    400,
    'MANIFEST_BLOB_UNKNOWN',
    `the manifest references ${what === 'blob' ? 'a blob' : 'a manifest'} not in the repository: ${digest}`,
    { digest },
  );
