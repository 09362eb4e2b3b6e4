import type { FastifyReply, FastifyRequest } from 'fastify';
import type { BlobPin } from '../../../../../store/blob/refs.ts';
import type { Upload } from '../../../repository.ts';
import {
  bodyChunks,
  coalesce,
  declaredLength,
  disconnectSignal,
  hasBody,
  ownsBodyChunks,
} from '../../../registry/body.ts';
import { uploadUnknown } from '../../../registry/errors.ts';
import type { RouteDeps } from '../../deps.ts';
import {
  access,
  checkDeclaredSize,
  checkRange,
  drain,
  liveUpload,
  outOfOrder,
  pinBlob,
  storeError,
  uploadHeaders,
} from '../common.ts';

/**
 * `PATCH /v2/<name>/blobs/uploads/<uuid>`: stores the chunk as a blob of its own and appends it to
 * the upload if no other chunk landed meanwhile (416 otherwise); 202 with the new `Range`.
 */
export async function appendChunk(
  deps: RouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  user: string,
  name: string,
  uuid: string,
): Promise<FastifyReply> {
  let upload: Upload;
  let range: { start: number; end: number } | null;
  try {
    await access(deps, name, user);
    upload = await liveUpload(deps, name, uuid);
    range = checkRange(request, name, upload);
    checkDeclaredSize(deps, request, upload.size);
  } catch (error) {
    drain(request);
    throw error;
  }
  const { repository, blobs, refs } = deps;
  let part = { sha256: '', size: 0 };
  let pin: BlobPin | null = null;
  if (hasBody(request.raw)) {
    const disconnect = disconnectSignal(request.raw, reply.raw);
    try {
      const remaining = deps.maxBlobBytes - upload.size;
      const sizeHint = declaredLength(request.raw);
      part = await blobs.put(coalesce(bodyChunks(request.raw, deps.received)), {
        maxBytes: remaining,
        signal: disconnect.signal,
        giveChunks: ownsBodyChunks(request.raw),
        ...(sizeHint === undefined ? {} : { sizeHint }),
      });
    } catch (error) {
      throw storeError(error);
    } finally {
      disconnect.dispose();
    }
    if (part.size === 0) {
      // An empty chunk adds nothing; its (empty) blob is left to the sweeper unless held elsewhere.
      await refs.markCandidate(part.sha256);
    } else {
      pin = await pinBlob(deps, part.sha256);
    }
  }
  if (range && part.size !== range.end - range.start + 1) {
    // The pin stays behind as a deletion candidate: the chunk's blob goes with the sweeper.
    throw outOfOrder(
      name,
      upload,
      `Content-Range announces ${range.end - range.start + 1} bytes but the chunk has ${part.size}`,
    );
  }
  const outcome = await repository.appendPart(uuid, upload.size, part, pin, deps.now()).catch((error: unknown) => {
    throw storeError(error);
  });
  if (outcome === 'gone') throw uploadUnknown();
  if (outcome === 'conflict') {
    deps.followers.drop(uuid);
    const current = await liveUpload(deps, name, uuid);
    throw outOfOrder(name, current, 'another chunk was appended to this upload meanwhile');
  }
  deps.followers.appended(upload, part);
  return reply
    .code(202)
    .headers({ ...uploadHeaders(name, uuid, upload.size + part.size), 'content-length': '0' })
    .send();
}
