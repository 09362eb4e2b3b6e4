/**
 * Registry paths are matched from their end (service README, "Routing"): repository names contain
 * `/` and digests contain `:`, so no router pattern can split them. `path` is what follows `/v2/`,
 * decoded.
 */
export type RegistryPath =
  | { kind: 'base' }
  | { kind: 'catalog' }
  | { kind: 'tags'; name: string }
  | { kind: 'uploads'; name: string }
  | { kind: 'upload'; name: string; uuid: string }
  | { kind: 'blob'; name: string; digest: string }
  | { kind: 'manifest'; name: string; reference: string }
  | { kind: 'unknown' };

const UPLOADS = /^(.+)\/blobs\/uploads\/?$/;
const UPLOAD = /^(.+)\/blobs\/uploads\/([^/]+)$/;
const BLOB = /^(.+)\/blobs\/([^/]+)$/;
const MANIFEST = /^(.+)\/manifests\/([^/]+)$/;
const TAGS = /^(.+)\/tags\/list$/;

/**
 * Classifies a path for a method. The method matters for ambiguous ends: `x/blobs/uploads` is the
 * uploads collection for POST but would be a blob named `uploads` for HEAD.
 */
export function parseRegistryPath(method: string, path: string): RegistryPath {
  if (path === '') return { kind: 'base' };
  if (path === '_catalog') return { kind: 'catalog' };
  let m: RegExpExecArray | null;
  if (method === 'POST') {
    if ((m = UPLOADS.exec(path))) return { kind: 'uploads', name: m[1]! };
    return { kind: 'unknown' };
  }
  if ((m = TAGS.exec(path))) return { kind: 'tags', name: m[1]! };
  if ((m = UPLOAD.exec(path))) return { kind: 'upload', name: m[1]!, uuid: m[2]! };
  if ((m = BLOB.exec(path))) return { kind: 'blob', name: m[1]!, digest: m[2]! };
  if ((m = MANIFEST.exec(path))) return { kind: 'manifest', name: m[1]!, reference: m[2]! };
  return { kind: 'unknown' };
}

/** The path part of a request URL after `/v2/`, percent-decoded; null when it cannot be decoded. */
export function registryPathOf(url: string): string | null {
  const query = url.indexOf('?');
  const path = query >= 0 ? url.slice(0, query) : url;
  const rest = path.startsWith('/v2/') ? path.slice(4) : path === '/v2' ? '' : path;
  try {
    return decodeURIComponent(rest);
  } catch {
    return null;
  }
}
