import type { FastifyReply, FastifyRequest } from 'fastify';
import { isUuidV4 } from '../../../../core/ids.ts';
import { BlobGoneError, type BlobPin } from '../../../../store/blob/refs.ts';
import { BlobDigestMismatchError, BlobTooLargeError, type BlobInfo } from '../../../../store/blob/types.ts';
import { digestHex, isRepositoryName } from '../../names.ts';
import type { Upload } from '../../repository.ts';
import { declaredLength, disconnectSignal, parseContentRange } from '../../registry/body.ts';
import {
  denied,
  digestInvalid,
  nameInvalid,
  sizeInvalid,
  unavailable,
  uploadInvalid,
  uploadUnknown,
  type RegistryError,
} from '../../registry/errors.ts';
import type { RouteDeps } from '../deps.ts';

/** What the registry's endpoints share: access checks, blob storage, upload state and its headers. */

/** Lets an unread request body flow to nowhere, so an early answer does not stall the connection. */
export function drain(request: FastifyRequest): void {
  if (!request.raw.readableEnded) request.raw.resume();
}

/** Maps blob store failures to registry errors. */
export function storeError(error: unknown): unknown {
  if (error instanceof BlobTooLargeError) return sizeInvalid(`blob exceeds the limit of ${error.maxBytes} bytes`);
  if (error instanceof BlobDigestMismatchError)
    return digestInvalid('the uploaded content does not match the digest', {
      expected: `sha256:${error.expected}`,
      actual: `sha256:${error.actual}`,
    });
  if (error instanceof BlobGoneError) return unavailable('storage changed during the upload; retry');
  return error;
}

const rangeHeader = (size: number) => `0-${size > 0 ? size - 1 : 0}`;

/** Checks the name and that the caller may push to it; returns the owner (null: unused name). */
export async function access(deps: RouteDeps, name: string, user: string): Promise<string | null> {
  if (!isRepositoryName(name)) throw nameInvalid(name);
  const owner = await deps.repository.ownerOf(name);
  if (owner !== null && owner !== user) throw denied(name);
  return owner;
}

/** The upload `uuid` of `name`, unless it is unknown or has expired. */
export async function liveUpload(deps: RouteDeps, name: string, uuid: string): Promise<Upload> {
  if (!isUuidV4(uuid)) throw uploadUnknown();
  const upload = await deps.repository.upload(uuid);
  // An upload is addressed under the name it was started with; an idle one has expired even
  // before the sweeper removes it.
  if (!upload || upload.repository !== name || upload.updatedAt < deps.now() - deps.uploadExpiryMs)
    throw uploadUnknown();
  return upload;
}

/** Streams `source` into the blob store under the size limit, verifying `digest` when given. */
export async function storeBlob(
  deps: RouteDeps,
  source: AsyncIterable<Uint8Array>,
  request: FastifyRequest,
  reply: FastifyReply,
  digest?: string,
): Promise<BlobInfo> {
  const disconnect = disconnectSignal(request.raw, reply.raw);
  try {
    return await deps.blobs.put(source, {
      maxBytes: deps.maxBlobBytes,
      ...(digest !== undefined ? { expectedSha256: digestHex(digest) } : {}),
      signal: disconnect.signal,
    });
  } catch (error) {
    throw storeError(error);
  } finally {
    disconnect.dispose();
  }
}

/** Refuses, before reading it, a body whose declared length takes the blob past the limit. */
export function checkDeclaredSize(deps: RouteDeps, request: FastifyRequest, already: number): void {
  const declared = declaredLength(request.raw);
  if (declared !== undefined && already + declared > deps.maxBlobBytes) {
    drain(request);
    throw sizeInvalid(`blob exceeds the limit of ${deps.maxBlobBytes} bytes`);
  }
}

/** Pins a just-stored blob (see the store's blob references) or answers a retryable 503. */
export async function pinBlob(deps: RouteDeps, sha256: string): Promise<BlobPin> {
  try {
    return await deps.refs.pin(sha256);
  } catch (error) {
    throw storeError(error);
  }
}

export function uploadHeaders(name: string, uuid: string, size: number): Record<string, string> {
  return { location: `/v2/${name}/blobs/uploads/${uuid}`, 'docker-upload-uuid': uuid, range: rangeHeader(size) };
}

/** 416 with the upload's current state. */
export function outOfOrder(name: string, upload: Upload, message: string): RegistryError {
  return uploadInvalid(message, upload.size, uploadHeaders(name, upload.id, upload.size));
}

/** The `Content-Range` of a chunk, checked against the upload before a byte is read. */
export function checkRange(
  request: FastifyRequest,
  name: string,
  upload: Upload,
): { start: number; end: number } | null {
  const header = request.headers['content-range'];
  if (header === undefined) return null;
  const range = parseContentRange(header);
  if (!range) throw outOfOrder(name, upload, `malformed Content-Range '${header}'`);
  if (range.start !== upload.size)
    throw outOfOrder(name, upload, `chunk starts at ${range.start} but the upload has ${upload.size} bytes`);
  return range;
}
