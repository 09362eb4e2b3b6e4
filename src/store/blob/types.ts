import type { FileHandle } from 'node:fs/promises';

/** What the store knows about one blob: its content address and length in bytes. */
export interface BlobInfo {
  sha256: string;
  size: number;
  /**
   * The deletion candidate registered with new content (`BlobPutOptions.candidateDueAt`): the pin
   * of a write (`BlobRefs.pinPut`). Absent when the content was stored already, or the store
   * keeps no rows in the database.
   */
  candidate?: number;
}

export interface BlobPutOptions {
  /** Reject with `BlobTooLargeError` (storing nothing) once more than this many bytes arrive. */
  maxBytes?: number;
  /** Reject with `BlobDigestMismatchError` (storing nothing) when the content hashes differently. */
  expectedSha256?: string;
  /** Aborting rejects with the signal's reason and stores nothing (unless the blob was already durable). */
  signal?: AbortSignal;
  /**
   * The size the caller expects (a `Content-Length`), when it knows one: a store that places
   * small and large blobs differently decides at once instead of reading ahead. Only a hint; the
   * content decides the digest and size.
   */
  sizeHint?: number;
  /**
   * The source's chunks are the put's to keep: the source never reads nor writes a chunk again
   * once it has yielded it (an HTTP request body: each chunk a buffer of its own). A store may
   * then hand a written chunk to the hashing thread instead of copying it there, which detaches
   * it. Stores that copy the content anyway ignore it.
   */
  giveChunks?: boolean;
  /**
   * For a store that keeps its blob rows in the database the references live in (PostgreSQL):
   * when the put stores content that was not there (and no tombstone names it), it also registers
   * the blob as a deletion candidate due at this instant (ms), in the same statement, and answers
   * the candidate (`BlobInfo.candidate`): the pin of a write taken with the put instead of after
   * it, where the pin's own transaction was six of a small upload's nineteen statements. Other
   * stores ignore it.
   */
  candidateDueAt?: number;
}

/** An inclusive byte range. `end` past the last byte is clamped; a range starting past it is empty. */
export interface BlobRange {
  start: number;
  end: number;
}

export interface BlobStore {
  /**
   * Streams `source` into the store, hashing as it goes; resolves once durable. Content-addressed:
   * the key is the lowercase hex SHA-256, and putting content that is already stored keeps the
   * existing blob. When `put` stops early (too large, aborted, error) it stops reading `source`
   * and, like `for await`, ends its iterator (a Node stream is destroyed). The chunks are held
   * (not copied) until written, past the next read: a source never refills a buffer it yielded.
   */
  put(source: AsyncIterable<Uint8Array> | NodeJS.ReadableStream, options?: BlobPutOptions): Promise<BlobInfo>;
  /** Size, or null when absent (or when `sha256` is not 64 lowercase hex characters). */
  stat(sha256: string): Promise<BlobInfo | null>;
  /**
   * A readable stream of the content, optionally a byte range [start, end] inclusive; null when
   * absent. Streams: never loads the whole blob. Throws RangeError for a malformed range.
   */
  get(sha256: string, range?: BlobRange): Promise<NodeJS.ReadableStream | null>;
  /** Removes it; returns whether it existed. */
  delete(sha256: string): Promise<boolean>;
}

export class BlobTooLargeError extends Error {
  readonly code = 'blob_too_large';
  constructor(readonly maxBytes: number) {
    super(`blob exceeds the limit of ${maxBytes} bytes`);
    this.name = 'BlobTooLargeError';
  }
}

export class BlobDigestMismatchError extends Error {
  readonly code = 'blob_digest_mismatch';
  constructor(
    readonly expected: string,
    readonly actual: string,
  ) {
    super(`blob digest mismatch: expected sha256 ${expected}, got ${actual}`);
    this.name = 'BlobDigestMismatchError';
  }
}

/** Raised mid-stream when a blob disappears (deleted concurrently) while it is being read. */
export class BlobNotFoundError extends Error {
  readonly code = 'blob_not_found';
  constructor(readonly sha256: string) {
    super(`blob ${sha256} not found`);
    this.name = 'BlobNotFoundError';
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** True for a well-formed key. Adapters check this before building any path or query from it. */
export function isSha256(value: unknown): value is string {
  return typeof value === 'string' && SHA256_HEX.test(value);
}

/** Validates put options up front so a bad call fails before reading a byte. */
export function checkPutOptions(options: BlobPutOptions): void {
  const { maxBytes, expectedSha256 } = options;
  if (maxBytes !== undefined && !(Number.isSafeInteger(maxBytes) && maxBytes >= 0)) {
    throw new TypeError('maxBytes must be a non-negative integer');
  }
  if (expectedSha256 !== undefined && !isSha256(expectedSha256)) {
    throw new TypeError('expectedSha256 must be 64 lowercase hex characters');
  }
  if (options.candidateDueAt !== undefined && !Number.isSafeInteger(options.candidateDueAt)) {
    throw new TypeError('candidateDueAt must be an integer (ms)');
  }
}

/**
 * Checks a range against the blob's size. Returns the clamped inclusive range, or null when it
 * selects no bytes (start at or past the end, or an empty blob).
 */
export function resolveRange(range: BlobRange | undefined, size: number): BlobRange | null {
  if (range === undefined) return size === 0 ? null : { start: 0, end: size - 1 };
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start) {
    throw new RangeError(`invalid byte range ${String(start)}-${String(end)}`);
  }
  if (start >= size) return null;
  return { start, end: Math.min(end, size - 1) };
}

/**
 * Iterates `source` as Uint8Array chunks and stops promptly when `signal` aborts, even while the
 * source is waiting for data (a stalled upload must not pin the put). On an early exit the source
 * iterator is ended without awaiting it, since a stuck source might never settle; a Node stream
 * interrupted mid-read is destroyed, because its iterator cannot end while a read is pending.
 */
export async function* readSource(
  source: AsyncIterable<Uint8Array> | NodeJS.ReadableStream,
  signal?: AbortSignal,
): AsyncGenerator<Uint8Array, void, undefined> {
  const iterator = (source as AsyncIterable<Uint8Array | string>)[Symbol.asyncIterator]();
  let finished = false;
  let reading = false;
  try {
    for (;;) {
      signal?.throwIfAborted();
      reading = true;
      const next = signal ? await raceAbort(iterator.next(), signal) : await iterator.next();
      reading = false;
      if (next.done) {
        finished = true;
        return;
      }
      const value = next.value;
      yield typeof value === 'string' ? Buffer.from(value) : value;
    }
  } finally {
    if (!finished) {
      const destroy = (source as { destroy?: unknown }).destroy;
      if (reading && typeof destroy === 'function') destroy.call(source);
      if (iterator.return) Promise.resolve(iterator.return()).catch(() => {});
    }
  }
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      // The pending read may still reject once the source is torn down; nobody waits for it.
      promise.catch(() => {});
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/**
 * The open file behind a stream from `BlobStore.get`, when the store reads a local file: a consumer
 * that sends the bytes itself (into reused buffers, instead of one new buffer per chunk, whose
 * garbage costs a large heap a full collection every few dozen MiB) reads `[start, end]` from
 * `handle` and then destroys the stream, which closes the handle. A consumer that reads the stream
 * instead ignores it.
 */
export interface BlobFile {
  readonly handle: FileHandle;
  readonly start: number;
  /** Inclusive. */
  readonly end: number;
}

const BLOB_FILE = Symbol('stratus.blobFile');

/** Marks `stream` as reading `file` (see BlobFile). */
export function withBlobFile<S extends object>(stream: S, file: BlobFile): S {
  Object.defineProperty(stream, BLOB_FILE, { value: file });
  return stream;
}

/** The file behind a blob stream that has not been read yet, or undefined. */
export function blobFileOf(stream: NodeJS.ReadableStream): BlobFile | undefined {
  const file = (stream as { [BLOB_FILE]?: BlobFile })[BLOB_FILE];
  const readable = stream as { readableDidRead?: boolean; destroyed?: boolean };
  return file && !readable.readableDidRead && !readable.destroyed ? file : undefined;
}
