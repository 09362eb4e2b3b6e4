import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import type { ServiceApp } from '../../../src/core/app.ts';
import { asUser } from '../../helpers/service.ts';

export const digestOf = (data: Buffer | string) => `sha256:${createHash('sha256').update(data).digest('hex')}`;

export const DOCKER_MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json';

/** Asserts the OCI error body and returns the first error. */
export function assertRegistryError(
  response: LightMyRequestResponse,
  status: number,
  code: string,
): { code: string; message: string; detail: unknown } {
  assert.equal(response.statusCode, status, `expected ${status} ${code}, got ${response.statusCode}: ${response.body}`);
  assert.equal(response.headers['docker-distribution-api-version'], 'registry/2.0');
  assert.match(String(response.headers['content-type']), /^application\/json/);
  const body = response.json() as { errors: { code: string; message: string; detail: unknown }[] };
  assert.deepEqual(Object.keys(body), ['errors']);
  assert.equal(body.errors.length, 1);
  const first = body.errors[0]!;
  assert.deepEqual(Object.keys(first), ['code', 'message', 'detail']);
  assert.equal(first.code, code);
  assert.ok(first.message.length > 0);
  return first;
}

/** Monolithic push of one blob (POST ?digest=); asserts 201. */
export async function pushBlob(app: ServiceApp, user: string, name: string, data: Buffer | string): Promise<string> {
  const digest = digestOf(data);
  const response = await app.inject({
    method: 'POST',
    url: `/v2/${name}/blobs/uploads/?digest=${digest}`,
    headers: { ...asUser(user), 'content-type': 'application/octet-stream' },
    payload: Buffer.from(data),
  });
  assert.equal(response.statusCode, 201, response.body);
  return digest;
}

/** Pushes a config and one layer, then an image manifest under `tag`; returns the manifest digest. */
export async function pushImage(
  app: ServiceApp,
  user: string,
  name: string,
  tag: string,
  layer = 'hello blob',
): Promise<string> {
  const config = await pushBlob(app, user, name, '{}');
  const layerDigest = await pushBlob(app, user, name, layer);
  const manifest = imageManifest(config, 2, layerDigest, Buffer.byteLength(layer));
  const response = await app.inject({
    method: 'PUT',
    url: `/v2/${name}/manifests/${tag}`,
    headers: { ...asUser(user), 'content-type': DOCKER_MANIFEST },
    payload: manifest,
  });
  assert.equal(response.statusCode, 201, response.body);
  return String(response.headers['docker-content-digest']);
}

export function imageManifest(
  config: string,
  configSize: number,
  layer: string,
  layerSize: number,
  mediaType = DOCKER_MANIFEST,
): string {
  return JSON.stringify({
    schemaVersion: 2,
    mediaType,
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: configSize, digest: config },
    layers: [{ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: layerSize, digest: layer }],
  });
}
