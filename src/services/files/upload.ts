import { disconnectSignal as disconnectSignalOf } from '../../core/stream.ts';
import { readAhead } from '../../core/read-ahead.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { streamDigest } from '../../store/blob/digest.ts';
import { BlobTooLargeError, type BlobInfo, type BlobStore } from '../../store/blob/types.ts';
import { FilesErrors } from './errors.ts';
import { SNIFF_LENGTH } from './sniff.ts';

/** What streaming a body into the blob store produced. */
export interface ReceivedBody {
  /** The blob as the store answered it (with its candidate when the put pinned new content). */
  stored: BlobInfo;
  sha256: string;
  size: number;
  md5: string;
  /** The first bytes (at most 512), for media type sniffing. */
  head: Buffer;
}

/** Aborts the upload when the client goes away before its body is complete. */
export function disconnectSignal(
  request: IncomingMessage,
  response: ServerResponse,
): { signal: AbortSignal; dispose(): void } {
  return disconnectSignalOf(request, response, FilesErrors.clientDisconnected);
}

/** Bytes read ahead of the store: the socket keeps flowing while the store writes. */
const READ_AHEAD_BYTES = 4 * 1024 * 1024;

/**
 * The request body as chunks, each seen by `onChunk` as it is read (read ahead of the store, so
 * hashing overlaps the store's writes instead of waiting for them; `onChunk` throwing stops the
 * body, and a promise it returns is awaited before the next read). A body cut before its end
 * fails with `bodyIncomplete` (or the abort reason once the client's disconnect was noticed).
 *
 * Stopping early leaves the request alone instead of destroying it (which would destroy the
 * socket): the error response (413, 400) can still be written, with `Connection: close` so that
 * the unread rest of the body is never parsed as a request.
 */
async function* bodyOf(
  request: IncomingMessage,
  signal: AbortSignal,
  onChunk: (chunk: Buffer) => Promise<void> | undefined,
): AsyncGenerator<Buffer, void, undefined> {
  // An empty body read by nobody has not ended yet; one that already ended yields nothing more.
  if (request.readableEnded) return;
  try {
    for await (const chunk of request.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      const behind = onChunk(chunk);
      if (behind) await behind;
      yield chunk;
    }
  } catch (error) {
    if ((error as { code?: unknown } | null)?.code === 'ERR_STREAM_PREMATURE_CLOSE')
      throw signal.aborted ? signal.reason : FilesErrors.bodyIncomplete();
    throw error;
  }
}

/**
 * Streams the request body into the blob store: MD5 (off the main thread once large) and size
 * are computed as the bytes arrive (the store computes SHA-256) and the first 512 bytes are kept
 * for sniffing. At most the read-ahead is held: the socket is read only as fast as storage writes.
 * Over `maxBytes` → 413 with nothing stored; an abort stores nothing either.
 */
export async function receiveBody(
  body: IncomingMessage,
  blobs: BlobStore,
  options: { maxBytes: number; signal: AbortSignal; sizeHint?: number; candidateDueAt?: number },
): Promise<ReceivedBody> {
  const md5 = streamDigest('md5');
  const head = Buffer.alloc(SNIFF_LENGTH);
  let headLength = 0;
  let size = 0;
  const onChunk = (chunk: Buffer) => {
    size += chunk.byteLength;
    if (size > options.maxBytes) throw FilesErrors.payloadTooLarge(options.maxBytes);
    if (headLength < SNIFF_LENGTH) {
      const n = Math.min(SNIFF_LENGTH - headLength, chunk.byteLength);
      head.set(chunk.subarray(0, n), headLength);
      headLength += n;
    }
    return md5.update(chunk);
  };
  try {
    const info = await blobs.put(
      // Chunks pass as they came (no joining copy): the stores gather them into their own writes.
      readAhead(bodyOf(body, options.signal, onChunk), { aheadBytes: READ_AHEAD_BYTES }),
      {
        maxBytes: options.maxBytes,
        signal: options.signal,
        ...(options.sizeHint === undefined ? {} : { sizeHint: options.sizeHint }),
        ...(options.candidateDueAt === undefined ? {} : { candidateDueAt: options.candidateDueAt }),
      },
    );
    return { stored: info, sha256: info.sha256, size, md5: await md5.digest(), head: head.subarray(0, headLength) };
  } catch (error) {
    if (error instanceof BlobTooLargeError) throw FilesErrors.payloadTooLarge(options.maxBytes);
    throw error;
  } finally {
    md5.dispose();
  }
}
