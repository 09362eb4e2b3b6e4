import type { FastifyReply, FastifyRequest } from 'fastify';
import { readAhead } from '../../../../../core/read-ahead.ts';
import { readSource, type BlobInfo } from '../../../../../store/blob/types.ts';
import { digestHex, digestProblem, toDigest } from '../../../names.ts';
import type { Upload } from '../../../repository.ts';
import { bodyChunks, coalesce, hasBody } from '../../../registry/body.ts';
import { RegistryError, digestInvalid, unavailable, uploadUnknown } from '../../../registry/errors.ts';
import type { RouteDeps } from '../../deps.ts';
import {
  access,
  checkDeclaredSize,
  checkRange,
  drain,
  liveUpload,
  outOfOrder,
  pinBlob,
  storeBlob,
  storeError,
} from '../common.ts';

/**
 * `PUT /v2/<name>/blobs/uploads/<uuid>?digest=`: ends the upload (with an optional final chunk):
 * the blob is the chunks in order, verified against the digest, then linked to the repository (201).
 */
export async function finishUpload(
  deps: RouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  user: string,
  name: string,
  uuid: string,
): Promise<FastifyReply> {
  const query = request.query as Record<string, unknown>;
  const digest = typeof query.digest === 'string' ? query.digest : undefined;
  let upload: Upload;
  try {
    await access(deps, name, user);
    upload = await liveUpload(deps, name, uuid);
    const problem = digestProblem(digest);
    if (problem) throw digestInvalid(problem);
    checkRange(request, name, upload);
    checkDeclaredSize(deps, request, upload.size);
  } catch (error) {
    drain(request);
    throw error;
  }
  const verified = digest!;
  const { repository, blobs } = deps;
  const finalChunk = hasBody(request.raw);
  const follower = deps.followers.take(uuid);
  let info: BlobInfo | null = null;
  const only = upload.parts[0];
  if (!finalChunk && upload.parts.length === 1 && only && toDigest(only.sha256) === verified) {
    // One chunk that already hashes to the digest (what `docker push` sends): nothing to re-read.
    follower?.abort();
    info = only;
  } else if (follower?.matches(upload)) {
    // This instance has been writing the blob while the chunks arrived: close it.
    try {
      info = await follower.finish(finalChunk ? bodyChunks(request.raw, deps.received) : null);
    } catch (error) {
      // With a final chunk the body is spent: answer. Without one, fall back to the re-read.
      if (finalChunk) throw storeError(error);
    }
    if (info && info.sha256 !== digestHex(verified)) {
      // Stored under the hash the bytes have; nothing refers to it, so the sweeper removes it.
      await deps.refs.markCandidate(info.sha256);
      await repository.discardUpload(uuid);
      throw digestInvalid('the uploaded content does not match the digest', {
        expected: verified,
        actual: toDigest(info.sha256),
      });
    }
  } else {
    follower?.abort();
  }
  if (!info) {
    // The chunks, then the final chunk, are streamed in order through one put that verifies the digest.
    async function* content(): AsyncGenerator<Uint8Array, void, undefined> {
      for (const part of upload.parts) {
        const stream = await blobs.get(part.sha256);
        if (!stream) throw unavailable('a chunk of this upload is missing from storage; restart the upload');
        yield* readSource(stream);
      }
      if (finalChunk) yield* bodyChunks(request.raw, deps.received);
    }
    try {
      info = await storeBlob(deps, readAhead(coalesce(content())), request, reply, verified);
    } catch (error) {
      if (error instanceof RegistryError && error.code === 'DIGEST_INVALID') await repository.discardUpload(uuid);
      throw error;
    }
  }
  const pin = await pinBlob(deps, info.sha256);
  const outcome = await repository.finishUpload(upload, verified, info.size, pin).catch((error: unknown) => {
    throw storeError(error);
  });
  if (outcome === 'gone') throw uploadUnknown();
  if (outcome === 'conflict') {
    const current = await liveUpload(deps, name, uuid);
    throw outOfOrder(name, current, 'a chunk was appended to this upload while it was being finished');
  }
  return reply
    .code(201)
    .headers({ location: `/v2/${name}/blobs/${verified}`, 'docker-content-digest': verified, 'content-length': '0' })
    .send();
}
