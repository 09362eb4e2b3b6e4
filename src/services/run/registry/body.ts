import { disconnectSignal as disconnectSignalOf } from '../../../core/stream.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { readSource } from '../../../store/blob/types.ts';
import { RegistryError, sizeInvalid } from './errors.ts';

/** Aborts a push when the client goes away before the exchange is complete, so it stores nothing. */
export function disconnectSignal(
  request: IncomingMessage,
  response: ServerResponse,
): { signal: AbortSignal; dispose(): void } {
  return disconnectSignalOf(
    request,
    response,
    () => new RegistryError(400, 'BLOB_UPLOAD_INVALID', 'the client disconnected during the upload'),
  );
}

/**
 * The request body as chunks, without destroying the request when the reader stops early (too
 * large, wrong digest): the socket stays usable, so the client receives the error answer (Node
 * discards the rest of the body) instead of a reset connection. `received` is told of each
 * chunk's size as it is read (the metrics' registry bytes in).
 */
export function bodyChunks(request: IncomingMessage, received?: (bytes: number) => void): AsyncIterable<Uint8Array> {
  const chunks = request.iterator({ destroyOnReturn: false }) as AsyncIterable<Uint8Array>;
  return received ? counted(chunks, received) : chunks;
}

async function* counted(
  chunks: AsyncIterable<Uint8Array>,
  received: (bytes: number) => void,
): AsyncGenerator<Uint8Array, void, undefined> {
  for await (const chunk of chunks) {
    received(chunk.byteLength);
    yield chunk;
  }
}

/**
 * Whether the body's chunks are the reader's to keep (`BlobPutOptions.giveChunks`): Node's HTTP
 * parser copies each body chunk out of the socket's reads into a buffer of its own. A request
 * made in process (Fastify's inject) carries the caller's own buffers instead.
 */
export function ownsBodyChunks(request: IncomingMessage): boolean {
  return request.socket instanceof Socket;
}

const COALESCE_BYTES = 1024 * 1024;
/**
 * Chunks this large pass as they are: joining them would cost a copy and one more off-heap buffer
 * per MiB, whose garbage brings V8's full collections sooner (a third of a push's main-thread CPU
 * by profile), while the stores already gather chunks into their own writes and hash batches.
 */
const PASS_BYTES = 16 * 1024;

/**
 * Regroups runs of small chunks (chunked-encoding fragments, short socket reads) into chunks of
 * about 1 MiB, so the blob store handles a few large pieces instead of thousands of tiny ones;
 * chunks of at least 16 KiB (or `bytes`) pass on without a copy. Order is kept; holds at most one
 * group in memory.
 */
export async function* coalesce(
  source: AsyncIterable<Uint8Array>,
  bytes = COALESCE_BYTES,
): AsyncGenerator<Uint8Array, void, undefined> {
  let held: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of source) {
    if (chunk.byteLength >= PASS_BYTES || (chunk.byteLength >= bytes && size === 0)) {
      if (size > 0) {
        yield joined(held, size);
        held = [];
        size = 0;
      }
      yield chunk;
      continue;
    }
    held.push(chunk);
    size += chunk.byteLength;
    if (size >= bytes) {
      yield joined(held, size);
      held = [];
      size = 0;
    }
  }
  if (size > 0) yield joined(held, size);
}

function joined(chunks: Uint8Array[], size: number): Uint8Array {
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
}

/** Whether the request carries a body (a length above zero, or chunked transfer). */
export function hasBody(request: IncomingMessage): boolean {
  if (request.headers['transfer-encoding'] !== undefined) return true;
  const length = request.headers['content-length'];
  return length !== undefined && length !== '0';
}

/** The declared Content-Length, or undefined when absent or not a plain number. */
export function declaredLength(request: IncomingMessage): number | undefined {
  const length = request.headers['content-length'];
  if (length === undefined || !/^\d+$/.test(length)) return undefined;
  return Number(length);
}

/** Reads a small body (a manifest) into memory, refusing it with 413 past `maxBytes`. */
export async function readLimited(request: IncomingMessage, maxBytes: number, signal: AbortSignal): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of readSource(bodyChunks(request), signal)) {
    size += chunk.byteLength;
    if (size > maxBytes) throw sizeInvalid(`manifest exceeds ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

/** `Content-Range: <start>-<end>` (also `bytes <start>-<end>/<total>`); null when malformed. */
export function parseContentRange(value: string): { start: number; end: number } | null {
  const match = /^(?:bytes[ =])?(\d+)-(\d+)(?:\/(?:\d+|\*))?$/.exec(value.trim());
  if (!match) return null;
  const start = Number(match[1]);
  const end = Number(match[2]);
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || end < start) return null;
  return { start, end };
}
