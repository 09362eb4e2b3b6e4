import { randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { digestProblem } from '../../../names.ts';
import { bodyChunks, coalesce } from '../../../registry/body.ts';
import { denied, digestInvalid } from '../../../registry/errors.ts';
import type { RouteDeps } from '../../deps.ts';
import { access, checkDeclaredSize, drain, pinBlob, storeBlob, storeError } from '../common.ts';

/**
 * `POST /v2/<name>/blobs/uploads/`: with `?digest=` a monolithic upload (the whole blob in this
 * request, 201); otherwise a new upload (202). A first push creates the repository.
 */
export async function startUpload(
  deps: RouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  user: string,
  name: string,
): Promise<FastifyReply> {
  const query = request.query as Record<string, unknown>;
  const digest = typeof query.digest === 'string' ? query.digest : undefined;
  await access(deps, name, user).catch((error: unknown) => {
    drain(request);
    throw error;
  });
  if (digest !== undefined) {
    // Monolithic upload: the whole blob in this request.
    const problem = digestProblem(digest);
    if (problem) {
      drain(request);
      throw digestInvalid(problem);
    }
    checkDeclaredSize(deps, request, 0);
    const info = await storeBlob(deps, coalesce(bodyChunks(request.raw, deps.received)), request, reply, digest);
    const pin = await pinBlob(deps, info.sha256);
    const linked = await deps.repository.linkBlob(name, user, digest, info.size, pin).catch((error: unknown) => {
      throw storeError(error);
    });
    if (linked === 'denied') throw denied(name);
    return reply
      .code(201)
      .headers({ location: `/v2/${name}/blobs/${digest}`, 'docker-content-digest': digest, 'content-length': '0' })
      .send();
  }
  // `mount`/`from` are ignored: a normal upload starts. A body without a digest has nowhere to go.
  drain(request);
  const uuid = randomUUID();
  if ((await deps.repository.startUpload(uuid, name, user, deps.now())) === 'denied') throw denied(name);
  return reply
    .code(202)
    .headers({
      location: `/v2/${name}/blobs/uploads/${uuid}`,
      'docker-upload-uuid': uuid,
      range: '0-0',
      'content-length': '0',
    })
    .send();
}
