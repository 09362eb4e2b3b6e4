// Images come from the platform's own registry data, never from outside: the stored manifest and
// its blobs are written out as a `dir:` transport directory (containers/image's layout: the
// manifest as manifest.json, each blob named by its hex digest) and loaded with `podman pull dir:`.
// That transport takes Docker and OCI manifests alike, so what skopeo, buildah or podman pushed
// runs as pushed (zstd layers included).
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { BlobStore } from '../../../store/blob/types.ts';
import type { PodmanEngine } from './engine.ts';

const INDEX_TYPES = new Set([
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
]);
const IMAGE_TYPES = new Set([
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
]);

/** Where the stored manifests are read (the run repository). */
export interface ManifestSource {
  manifestBody(repository: string, digest: string): Promise<{ mediaType: string; body: Buffer } | null>;
}

export interface LoadedImage {
  /** The engine's image id (the config digest's hex). */
  id: string;
  /** The manifest digest it was loaded from (an index's entry for this machine, else the one asked). */
  digest: string;
  /** The lowest TCP port the image's config exposes (`EXPOSE`), or null. */
  exposedPort: number | null;
}

interface Descriptor {
  mediaType?: string;
  digest?: string;
  urls?: string[];
  platform?: { os?: string; architecture?: string; variant?: string };
}

/** The OCI architecture of this machine (Node's names differ for a few). */
export function hostArchitecture(arch: string = process.arch): string {
  const names: Record<string, string> = { x64: 'amd64', ia32: '386', ppc64: 'ppc64le' };
  return names[arch] ?? arch;
}

function parse(
  body: Buffer,
  what: string,
): { mediaType?: string; manifests?: Descriptor[]; config?: Descriptor; layers?: Descriptor[] } {
  try {
    return JSON.parse(body.toString('utf8')) as ReturnType<typeof parse>;
  } catch {
    throw new Error(`${what} is not JSON`);
  }
}

/** The image manifest to run for `digest`: itself, or an index's entry for linux on this machine's architecture. */
async function imageManifest(
  source: ManifestSource,
  repository: string,
  digest: string,
): Promise<{ digest: string; mediaType: string; body: Buffer }> {
  const stored = await source.manifestBody(repository, digest);
  if (!stored) throw new Error(`manifest ${digest} is not in ${repository}`);
  if (!INDEX_TYPES.has(stored.mediaType)) return { digest, ...stored };
  const arch = hostArchitecture();
  const entries = parse(stored.body, `manifest ${digest}`).manifests ?? [];
  const entry = entries.find((e) => e.platform?.os === 'linux' && e.platform.architecture === arch);
  if (!entry?.digest) {
    const offered = entries.map((e) => `${e.platform?.os ?? '?'}/${e.platform?.architecture ?? '?'}`).join(', ');
    throw new Error(`the image index ${digest} has no linux/${arch} image (it has: ${offered || 'none'})`);
  }
  const child = await source.manifestBody(repository, entry.digest);
  if (!child) throw new Error(`manifest ${entry.digest} (linux/${arch} of ${digest}) is not in ${repository}`);
  return { digest: entry.digest, ...child };
}

function exposedPort(config: { ExposedPorts?: Record<string, unknown> | null }): number | null {
  const ports = Object.keys(config.ExposedPorts ?? {})
    .map((p) => /^(\d+)(?:\/tcp)?$/.exec(p))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .filter((p) => p > 0 && p < 65536);
  return ports.length ? Math.min(...ports) : null;
}

/**
 * Makes sure the engine has the image of `repository`'s manifest `digest`, loading it from the
 * platform's blobs through a temporary directory under `workDir` when it does not.
 */
export async function loadImage(
  engine: PodmanEngine,
  source: ManifestSource,
  blobs: BlobStore,
  repository: string,
  digest: string,
  workDir: string,
): Promise<LoadedImage> {
  const manifest = await imageManifest(source, repository, digest);
  if (!IMAGE_TYPES.has(manifest.mediaType))
    throw new Error(`manifest ${manifest.digest} has media type ${manifest.mediaType}, which the engine cannot run`);
  const parsed = parse(manifest.body, `manifest ${manifest.digest}`);
  const configDigest = parsed.config?.digest;
  if (!configDigest?.startsWith('sha256:')) throw new Error(`manifest ${manifest.digest} names no sha256 config`);
  const layers = parsed.layers ?? [];
  if (layers.some((l) => l.urls?.length)) throw new Error(`manifest ${manifest.digest} has foreign layers (urls)`);

  const id = configDigest.slice('sha256:'.length);
  let image = await engine.image(id);
  if (!image) {
    const dir = join(workDir, `${manifest.digest.slice(7, 19)}-${randomBytes(4).toString('hex')}`);
    await mkdir(dir, { recursive: true });
    try {
      await writeFile(join(dir, 'version'), 'Directory Transport Version: 1.1\n');
      await writeFile(join(dir, 'manifest.json'), manifest.body);
      for (const blobDigest of [configDigest, ...layers.map((l) => l.digest ?? '')]) {
        if (!blobDigest.startsWith('sha256:')) throw new Error(`manifest ${manifest.digest} names a non-sha256 blob`);
        const hex = blobDigest.slice(7);
        const stream = await blobs.get(hex);
        if (!stream) throw new Error(`blob ${blobDigest} of ${manifest.digest} is missing from the blob store`);
        await pipeline(stream, createWriteStream(join(dir, hex)));
      }
      await engine.pullDirectory(dir);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    image = await engine.image(id);
    if (!image) throw new Error(`the engine did not keep image ${id} after loading it`);
  }
  return { id, digest: manifest.digest, exposedPort: exposedPort(image.Config) };
}
