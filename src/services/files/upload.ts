import { disconnectSignal as disconnectSignalOf } from '../../core/stream.ts';
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BlobTooLargeError, type BlobStore } from '../../store/blob/types.ts';
import { FilesErrors } from './errors.ts';
import { SNIFF_LENGTH } from './sniff.ts';

/** What streaming a body into the blob store produced. */
export interface ReceivedBody {
  sha256: string;
  size: number;
  md5: string;
  /** The first bytes (at most 512), for media type sniffing. */
  head: Buffer;
}

/** Aborts the upload when the client goes away before its body is complete. */
export function disconnectSignal(request: IncomingMessage, response: ServerResponse): { signal: AbortSignal; dispose(): void } {
  return disconnectSignalOf(request, response, FilesErrors.clientDisconnected);
}

/** Bytes read ahead of the store: the socket keeps flowing while the store writes. */
const READ_AHEAD_BYTES = 4 * 1024 * 1024;
/** Largest piece handed to the store when several chunks are waiting (fewer write calls). */
const MAX_PIECE_BYTES = 1024 * 1024;

/**
 * Reads a request body ahead of its consumer, up to 4 MiB: `onChunk` sees every chunk as it
 * arrives (hashing overlaps the store's writes instead of waiting for them), and the consumer
 * pulls pieces (waiting chunks joined up to 1 MiB). Past the read-ahead the request is paused,
 * so a slow store slows the client down (back-pressure) and memory stays bounded.
 *
 * Stopping early leaves the request alone instead of destroying it (which would destroy the
 * socket): the error response (413, 400) can still be written, with `Connection: close` so that
 * the unread rest of the body is never parsed as a request.
 */
export async function* readAhead(request: IncomingMessage, signal: AbortSignal, onChunk: (chunk: Buffer) => void): AsyncGenerator<Buffer, void, undefined> {
  const queue: Buffer[] = [];
  let queued = 0;
  // An empty body read by nobody has not ended yet; one that already ended emits nothing more.
  let ended = request.readableEnded;
  let failure: unknown;
  let wake: (() => void) | undefined;
  const notify = () => {
    const resolve = wake;
    wake = undefined;
    resolve?.();
  };
  const fail = (error: unknown) => {
    failure ??= error;
    request.pause();
    notify();
  };
  const onData = (chunk: Buffer) => {
    if (failure !== undefined) return;
    try {
      onChunk(chunk);
    } catch (error) {
      return fail(error);
    }
    queue.push(chunk);
    queued += chunk.length;
    if (queued >= READ_AHEAD_BYTES) request.pause();
    notify();
  };
  const onEnd = () => {
    ended = true;
    notify();
  };
  const onClose = () => {
    if (!ended) fail(FilesErrors.bodyIncomplete());
  };
  const onAbort = () => fail(signal.reason);
  request.on('data', onData);
  request.on('end', onEnd);
  request.on('error', fail);
  request.on('close', onClose);
  signal.addEventListener('abort', onAbort);
  try {
    if (signal.aborted) fail(signal.reason);
    for (;;) {
      if (failure !== undefined) throw failure;
      if (queue.length > 0) {
        let piece = queue.shift()!;
        if (queue.length > 0 && piece.length < MAX_PIECE_BYTES) {
          const parts = [piece];
          let size = piece.length;
          while (queue.length > 0 && size + queue[0]!.length <= MAX_PIECE_BYTES) {
            const next = queue.shift()!;
            parts.push(next);
            size += next.length;
          }
          piece = Buffer.concat(parts, size);
        }
        queued -= piece.length;
        if (queued < READ_AHEAD_BYTES / 2 && request.isPaused() && failure === undefined) request.resume();
        yield piece;
        continue;
      }
      if (ended) return;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    request.off('data', onData);
    request.off('end', onEnd);
    request.off('error', fail);
    request.off('close', onClose);
    signal.removeEventListener('abort', onAbort);
    if (!ended) request.pause();
  }
}

/**
 * Streams the request body into the blob store: MD5 and size are computed as the bytes arrive
 * (the store computes SHA-256) and the first 512 bytes are kept for sniffing. At most the
 * read-ahead is held: the socket is read only as fast as storage writes.
 * Over `maxBytes` → 413 with nothing stored; an abort stores nothing either.
 */
export async function receiveBody(body: IncomingMessage, blobs: BlobStore, options: { maxBytes: number; signal: AbortSignal; sizeHint?: number }): Promise<ReceivedBody> {
  const md5 = createHash('md5');
  const head = Buffer.alloc(SNIFF_LENGTH);
  let headLength = 0;
  let size = 0;
  const onChunk = (chunk: Buffer) => {
    size += chunk.byteLength;
    if (size > options.maxBytes) throw FilesErrors.payloadTooLarge(options.maxBytes);
    md5.update(chunk);
    if (headLength < SNIFF_LENGTH) {
      const n = Math.min(SNIFF_LENGTH - headLength, chunk.byteLength);
      head.set(chunk.subarray(0, n), headLength);
      headLength += n;
    }
  };
  try {
    const info = await blobs.put(readAhead(body, options.signal, onChunk), { maxBytes: options.maxBytes, signal: options.signal, ...(options.sizeHint === undefined ? {} : { sizeHint: options.sizeHint }) });
    return { sha256: info.sha256, size, md5: md5.digest('hex'), head: head.subarray(0, headLength) };
  } catch (error) {
    if (error instanceof BlobTooLargeError) throw FilesErrors.payloadTooLarge(options.maxBytes);
    throw error;
  }
}
