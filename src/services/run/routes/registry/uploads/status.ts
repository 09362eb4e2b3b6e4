import type { FastifyReply } from 'fastify';
import type { RouteDeps } from '../../deps.ts';
import { access, liveUpload, uploadHeaders } from '../common.ts';

/** `GET /v2/<name>/blobs/uploads/<uuid>`: 204 with the bytes received so far (`Range`). */
export async function uploadStatus(
  deps: RouteDeps,
  reply: FastifyReply,
  user: string,
  name: string,
  uuid: string,
): Promise<FastifyReply> {
  await access(deps, name, user);
  const upload = await liveUpload(deps, name, uuid);
  return reply
    .code(204)
    .headers(uploadHeaders(name, uuid, upload.size))
    .send();
}
