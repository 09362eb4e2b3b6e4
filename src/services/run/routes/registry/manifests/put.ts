import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { digestProblem, isTag } from '../../../names.ts';
import { declaredLength, disconnectSignal, readLimited } from '../../../registry/body.ts';
import { denied, digestInvalid, manifestBlobUnknown, manifestInvalid, sizeInvalid } from '../../../registry/errors.ts';
import { MAX_MANIFEST_BYTES, parseManifest } from '../../../registry/manifest.ts';
import type { RouteDeps } from '../../deps.ts';
import { access, drain } from '../common.ts';

/**
 * `PUT /v2/<name>/manifests/<reference>`: stores a manifest (≤ 4 MiB) whose blobs and child
 * manifests are in the repository, under a tag or its own digest; a first push creates the repository.
 */
export async function putManifest(
  deps: RouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  user: string,
  name: string,
  reference: string,
): Promise<FastifyReply> {
  let tag: string | null = null;
  try {
    await access(deps, name, user);
    if (reference.includes(':')) {
      const problem = digestProblem(reference);
      if (problem) throw digestInvalid(problem);
    } else if (isTag(reference)) {
      tag = reference;
    } else {
      throw manifestInvalid(`invalid tag '${reference.slice(0, 200)}'`);
    }
    const declared = declaredLength(request.raw);
    if (declared !== undefined && declared > MAX_MANIFEST_BYTES)
      throw sizeInvalid(`manifest exceeds ${MAX_MANIFEST_BYTES} bytes`);
  } catch (error) {
    drain(request);
    throw error;
  }
  const disconnect = disconnectSignal(request.raw, reply.raw);
  let body: Buffer;
  try {
    body = await readLimited(request.raw, MAX_MANIFEST_BYTES, disconnect.signal);
  } finally {
    disconnect.dispose();
  }
  const digest = `sha256:${createHash('sha256').update(body).digest('hex')}`;
  if (tag === null && reference !== digest)
    throw digestInvalid(`the manifest's digest is ${digest}, not ${reference}`, {
      expected: reference,
      actual: digest,
    });
  const contentType = request.headers['content-type'];
  const manifest = parseManifest(body, contentType);
  const outcome = await deps.repository.putManifest({
    repository: name,
    owner: user,
    digest,
    mediaType: manifest.mediaType,
    body,
    tag,
    blobs: manifest.blobs,
    manifests: manifest.manifests,
  });
  if (outcome.kind === 'denied') throw denied(name);
  if (outcome.kind === 'unknown') throw manifestBlobUnknown(outcome.what, outcome.digest);
  return reply
    .code(201)
    .headers({ location: `/v2/${name}/manifests/${digest}`, 'docker-content-digest': digest, 'content-length': '0' })
    .send();
}
