import type { FastifyReply } from 'fastify';
import { digestProblem } from '../../names.ts';
import { blobUnknown, digestInvalid } from '../../registry/errors.ts';
import type { RouteDeps } from '../deps.ts';
import { access } from './common.ts';

/** `HEAD /v2/<name>/blobs/<digest>`: 200 with the size when the blob is linked to the repository. */
export async function headBlob(
  deps: RouteDeps,
  reply: FastifyReply,
  user: string,
  name: string,
  digest: string,
): Promise<FastifyReply> {
  const problem = digestProblem(digest);
  if (problem) throw digestInvalid(problem);
  const owner = await access(deps, name, user);
  const size = owner === null ? null : await deps.repository.linkedBlob(name, digest);
  if (size === null) throw blobUnknown(digest);
  return reply
    .code(200)
    .headers({
      'content-length': String(size),
      'docker-content-digest': digest,
      'content-type': 'application/octet-stream',
    })
    .send();
}
