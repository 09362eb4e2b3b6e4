import { MAX_BODY_NESTING, jsonTextDeeperThan } from '../../../core/json.ts';
import { isDigest } from '../names.ts';
import { manifestInvalid } from './errors.ts';

export const MANIFEST_TYPES = {
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociIndex: 'application/vnd.oci.image.index.v1+json',
} as const;

const IMAGE_TYPES = new Set<string>([MANIFEST_TYPES.dockerManifest, MANIFEST_TYPES.ociManifest]);
const INDEX_TYPES = new Set<string>([MANIFEST_TYPES.dockerList, MANIFEST_TYPES.ociIndex]);

/** Manifests are buffered (they are small JSON documents); larger ones are refused. */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;

export interface ParsedManifest {
  mediaType: string;
  /** Digests of the config and layer blobs (image manifests). */
  blobs: string[];
  /** Digests of child manifests (lists and indexes). */
  manifests: string[];
}

function mediaTypeOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const type = header.split(';')[0]?.trim().toLowerCase();
  return type === '' ? undefined : type;
}

function descriptorDigest(value: unknown, where: string): string {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw manifestInvalid(`${where} must be a descriptor object`);
  const digest = (value as { digest?: unknown }).digest;
  if (typeof digest !== 'string' || !isDigest(digest)) throw manifestInvalid(`${where}.digest must be a sha256 digest`);
  const size = (value as { size?: unknown }).size;
  if (size !== undefined && !(typeof size === 'number' && Number.isSafeInteger(size) && size >= 0))
    throw manifestInvalid(`${where}.size must be a non-negative integer`);
  return digest;
}

/**
 * Checks a manifest body against its Content-Type (service README, "Manifests"): one of the four
 * supported media types, JSON with `schemaVersion` 2, a `mediaType` member (when present) equal to
 * the Content-Type, and the descriptors an image manifest or an index must have. The body's own
 * `mediaType` is used when the Content-Type is absent.
 */
export function parseManifest(body: Buffer, contentType: string | undefined): ParsedManifest {
  let json: unknown;
  const text = body.toString('utf8');
  if (jsonTextDeeperThan(text, MAX_BODY_NESTING))
    throw manifestInvalid(`manifest is nested more than ${MAX_BODY_NESTING} levels deep`);
  try {
    json = JSON.parse(text);
  } catch {
    throw manifestInvalid('manifest is not valid JSON');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw manifestInvalid('manifest must be a JSON object');
  const doc = json as Record<string, unknown>;
  const declared = mediaTypeOf(contentType);
  const inner = doc.mediaType;
  if (inner !== undefined && typeof inner !== 'string') throw manifestInvalid('mediaType must be a string');
  const mediaType = declared ?? inner;
  if (mediaType === undefined) throw manifestInvalid('manifest media type missing: send a Content-Type');
  if (!IMAGE_TYPES.has(mediaType) && !INDEX_TYPES.has(mediaType))
    throw manifestInvalid(`unsupported manifest media type '${mediaType}'`);
  if (inner !== undefined && inner !== mediaType)
    throw manifestInvalid(`mediaType '${inner}' differs from Content-Type '${mediaType}'`);
  if (doc.schemaVersion !== 2) throw manifestInvalid('schemaVersion must be 2');

  if (IMAGE_TYPES.has(mediaType)) {
    if (doc.manifests !== undefined) throw manifestInvalid('an image manifest has no manifests list');
    const config = descriptorDigest(doc.config, 'config');
    if (!Array.isArray(doc.layers)) throw manifestInvalid('layers must be an array');
    const layers = doc.layers.map((layer, i) => descriptorDigest(layer, `layers[${i}]`));
    return { mediaType, blobs: [config, ...layers], manifests: [] };
  }
  if (!Array.isArray(doc.manifests)) throw manifestInvalid('manifests must be an array');
  const manifests = doc.manifests.map((child, i) => descriptorDigest(child, `manifests[${i}]`));
  return { mediaType, blobs: [], manifests };
}
