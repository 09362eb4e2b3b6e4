import type { ServiceApp } from '../../../core/app.ts';
import type { RouteDocs } from '../../../core/openapi.ts';
import { BlobGoneError } from '../../../store/blob/refs.ts';
import { FilesErrors } from '../errors.ts';
import { checkFilePath } from '../paths.ts';
import { errorBody, fileJson, fileSchema, pathDoc, pathParams, security } from '../schemas.ts';
import { chooseMediaType } from '../sniff.ts';
import { disconnectSignal, receiveBody } from '../upload.ts';
import { callerOf, header, sendJson } from './common.ts';
import type { RouteDeps } from './deps.ts';

export const uploadSchema = {
  tags: ['files'],
  security,
  operationId: 'uploadFile',
  summary: 'Upload a file: the raw body is the content (201 new, 200 replaced)',
  description: `${pathDoc} The body is streamed to storage while its size, MD5 and SHA-256 are computed; it replaces any previous content atomically. Over the upload limit → 413.`,
  params: pathParams,
  openapi: {
    rawBody: {
      mediaTypes: ['application/octet-stream'],
      description:
        "The file's content, streamed as sent. Any Content-Type is accepted: it becomes the file's mime_type (sniffed when absent or generic).",
    },
  } satisfies RouteDocs,
  response: {
    200: fileSchema,
    201: fileSchema,
    400: errorBody,
    401: errorBody,
    404: errorBody,
    413: errorBody,
    503: errorBody,
  },
};

/** PUT of a file: the raw request stream is its content (the README's "How an upload works"). */
export function registerUpload(raw: ServiceApp, { files, blobs, refs, maxUploadBytes, metrics }: RouteDeps): void {
  raw.put('/v1/buckets/:bucket_id/files/*', { schema: uploadSchema }, async (request, reply) => {
    const owner = callerOf(request);
    const path = checkFilePath(request.params['*']);
    const bucketId = request.params.bucket_id;
    // Cheap checks before reading a byte: the bucket, and a declared length over the limit.
    const found = await files.lookup(bucketId, owner, path);
    if (!found.bucket) throw FilesErrors.bucketNotFound();
    const declared = header(request, 'content-length');
    if (declared !== undefined && Number(declared) > maxUploadBytes) throw FilesErrors.payloadTooLarge(maxUploadBytes);

    const disconnect = disconnectSignal(request.raw, reply.raw);
    let received;
    try {
      received = await receiveBody(request.raw, blobs, {
        maxBytes: maxUploadBytes,
        signal: disconnect.signal,
        candidateDueAt: refs.candidateDueAt(),
        ...(declared !== undefined && /^\d+$/.test(declared) ? { sizeHint: Number(declared) } : {}),
      });
    } finally {
      disconnect.dispose();
    }
    metrics?.files('in', received.size);
    const pin = await refs.pinPut(received.stored).catch((error: unknown) => {
      if (error instanceof BlobGoneError) throw FilesErrors.storageChanged();
      throw error;
    });
    let result;
    try {
      result = await files.commitUpload(bucketId, owner, path, {
        pin,
        size: received.size,
        md5: received.md5,
        mimeType: chooseMediaType(received.head, header(request, 'content-type')),
      });
    } catch (error) {
      // The pin stays behind as a deletion candidate: the blob goes with the sweeper.
      if (error instanceof BlobGoneError) throw FilesErrors.storageChanged();
      throw error;
    }
    if (result.kind === 'no_bucket') throw FilesErrors.bucketNotFound();
    return sendJson(reply, result.kind === 'created' ? 201 : 200, fileJson(result.file));
  });
}
