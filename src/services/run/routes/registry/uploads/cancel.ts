import type { FastifyReply } from 'fastify';
import { uploadUnknown } from '../../../registry/errors.ts';
import type { RouteDeps } from '../../deps.ts';
import { access, liveUpload } from '../common.ts';

/** `DELETE /v2/<name>/blobs/uploads/<uuid>`: cancels the upload (204) and releases its chunks. */
export async function cancelUpload(
  deps: RouteDeps,
  reply: FastifyReply,
  user: string,
  name: string,
  uuid: string,
): Promise<FastifyReply> {
  await access(deps, name, user);
  await liveUpload(deps, name, uuid);
  deps.followers.drop(uuid);
  if (!(await deps.repository.discardUpload(uuid))) throw uploadUnknown();
  return reply.code(204).send();
}
