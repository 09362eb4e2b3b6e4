import type { FastifyReply } from 'fastify';
import { digestProblem, isTag } from '../../../names.ts';
import { digestInvalid, manifestInvalid, manifestUnknown } from '../../../registry/errors.ts';
import type { RouteDeps } from '../../deps.ts';
import { access } from '../common.ts';

/** A tag's digest (null when the tag is unknown), or the digest itself. */
async function resolveReference(deps: RouteDeps, name: string, reference: string): Promise<string | null> {
  if (reference.includes(':')) {
    const problem = digestProblem(reference);
    if (problem) throw digestInvalid(problem);
    return reference;
  }
  if (!isTag(reference)) throw manifestInvalid(`invalid tag '${reference.slice(0, 200)}'`);
  return deps.repository.tagDigest(name, reference);
}

/** `HEAD /v2/<name>/manifests/<reference>`: size, media type and digest of a tag's or digest's manifest. */
export async function headManifest(
  deps: RouteDeps,
  reply: FastifyReply,
  user: string,
  name: string,
  reference: string,
): Promise<FastifyReply> {
  const owner = await access(deps, name, user);
  const digest = await resolveReference(deps, name, reference);
  const manifest = owner === null || digest === null ? null : await deps.repository.manifest(name, digest);
  if (!manifest || digest === null) throw manifestUnknown(reference);
  return reply
    .code(200)
    .headers({
      'content-length': String(manifest.size),
      'content-type': manifest.mediaType,
      'docker-content-digest': digest,
    })
    .send();
}
