import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

/**
 * A digest of a stream of chunks, computed off the main thread once the stream is large: MD5 and
 * SHA-256 of a large upload were over 40% of the server's main-thread CPU, in series with parsing
 * the body and writing it. Content under one batch never leaves the thread (a hand-off costs more
 * than hashing a few KiB).
 */
export interface StreamDigest {
  /**
   * Adds `chunk` (copied when handed off, so the caller may write or drop it at once). Returns a
   * promise when the worker is behind by the bound of batches in flight: the caller awaits it
   * before the next chunk, which keeps the bytes held bounded.
   */
  update(chunk: Uint8Array): Promise<void> | undefined;
  /**
   * Like `update`, but a chunk that is a whole buffer of its own (at least 16 KiB) is moved to the
   * worker, not copied: it is detached, and the caller must not use it again. Smaller chunks and
   * views into a larger buffer are copied. A moved buffer is freed by the worker: no copy here, and
   * no buffer coming back, which V8 would count as new off-heap memory (its collections start
   * every 64 MiB of that).
   */
  give(chunk: Uint8Array): Promise<void> | undefined;
  /** The lowercase hex digest of everything added. Call once, after the last update. */
  digest(): Promise<string>;
  /** Forgets the stream (a put that failed); harmless after `digest`. */
  dispose(): void;
}

export type DigestAlgorithm = 'sha256' | 'md5';

/** Bytes per hand-off: ~2,000 messages per GiB; 4 in flight hold 2 MiB per stream. */
const BATCH_BYTES = 512 * 1024;
/**
 * Bytes one stream may have at the worker (4 batches); past this `update` asks the caller to wait.
 */
const BYTES_IN_FLIGHT = 4 * BATCH_BYTES;
/** Given chunks below this are copied: a message costs more than copying a few KiB. */
const GIVE_MIN_BYTES = 16 * 1024;
/** Batch buffers kept for reuse between streams, beyond which returned ones are dropped. */
const SPARE_BATCHES = 8;
/**
 * Worker threads: one per core up to two, so that the MD5 and SHA-256 of one upload run side by
 * side on different threads.
 */
const WORKERS = Math.max(1, Math.min(2, availableParallelism()));

// The worker is evaluated from source (CommonJS): no file to resolve, whether the server runs from
// TypeScript sources or a build.
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const hashes = new Map();
parentPort.on('message', (message) => {
  const { kind, id } = message;
  if (kind === 'data') {
    let hash = hashes.get(id);
    if (hash === undefined) hashes.set(id, (hash = createHash(message.algorithm)));
    hash.update(new Uint8Array(message.buffer, 0, message.length));
    if (message.given) parentPort.postMessage({ kind: 'free', id, bytes: message.length });
    else parentPort.postMessage({ kind: 'free', id, bytes: message.length, buffer: message.buffer }, [message.buffer]);
  } else if (kind === 'end') {
    const hash = hashes.get(id) ?? createHash(message.algorithm);
    hashes.delete(id);
    parentPort.postMessage({ kind: 'digest', id, hex: hash.digest('hex') });
  } else if (kind === 'drop') {
    hashes.delete(id);
  }
});
`;

type FromWorker =
  { kind: 'free'; id: number; bytes: number; buffer?: ArrayBuffer } | { kind: 'digest'; id: number; hex: string };

interface Job {
  freed(bytes: number, buffer: ArrayBuffer | undefined): void;
  done(hex: string): void;
  failed(error: unknown): void;
}

interface HashWorker {
  worker: Worker;
  jobs: Map<number, Job>;
}

const workers: (HashWorker | undefined)[] = [];
const spare: ArrayBuffer[] = [];
let nextId = 1;

/** The worker with the fewest streams, started on first use; a dead one is replaced. */
function pickWorker(): HashWorker {
  let best: HashWorker | undefined;
  for (let i = 0; i < WORKERS; i++) {
    const entry = (workers[i] ??= startWorker(i));
    if (best === undefined || entry.jobs.size < best.jobs.size) best = entry;
  }
  return best!;
}

function startWorker(slot: number): HashWorker {
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    name: 'stratus-digest',
    resourceLimits: { maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: 16, stackSizeMb: 1 },
  });
  const entry: HashWorker = { worker, jobs: new Map() };
  worker.on('message', (message: FromWorker) => {
    const job = entry.jobs.get(message.id);
    if (message.kind === 'free') {
      if (job) job.freed(message.bytes, message.buffer);
      else if (message.buffer) release(message.buffer);
    } else {
      removeJob(entry, message.id);
      job?.done(message.hex);
    }
  });
  const fail = (error: unknown) => {
    if (workers[slot] === entry) workers[slot] = undefined;
    for (const job of entry.jobs.values()) job.failed(error);
    entry.jobs.clear();
  };
  worker.on('error', fail);
  worker.on('exit', (code) => fail(new Error(`digest worker exited with code ${code}`)));
  // An idle worker must not keep the process alive (see addJob); after the listeners, since
  // adding a 'message' listener refs the worker's port again.
  worker.unref();
  return entry;
}

/** A worker with streams in progress keeps the process alive until their digests arrive. */
function addJob(entry: HashWorker, id: number, job: Job): void {
  if (entry.jobs.size === 0) entry.worker.ref();
  entry.jobs.set(id, job);
}

function removeJob(entry: HashWorker, id: number): void {
  if (entry.jobs.delete(id) && entry.jobs.size === 0) entry.worker.unref();
}

function takeBuffer(): ArrayBuffer {
  return spare.pop() ?? new ArrayBuffer(BATCH_BYTES);
}

function release(buffer: ArrayBuffer): void {
  if (spare.length < SPARE_BATCHES && buffer.byteLength === BATCH_BYTES) spare.push(buffer);
}

/** A digest of `algorithm` over the chunks given to `update` (see StreamDigest). */
export function streamDigest(algorithm: DigestAlgorithm): StreamDigest {
  // Until a batch fills, the chunks are only referenced (a put's source never refills a buffer it
  // yielded): a small stream is hashed here at the end, without a copy.
  let held: Uint8Array[] = [];
  let heldBytes = 0;
  // Once handed off: the batch being filled, and the worker's side of the stream.
  let batch: Uint8Array | undefined;
  let filled = 0;
  let remote: { entry: HashWorker; id: number } | undefined;
  let bytesInFlight = 0;
  let failure: { error: unknown } | undefined;
  let waiting: { resolve(): void; reject(error: unknown): void } | undefined;
  let result: { resolve(hex: string): void; reject(error: unknown): void } | undefined;
  let disposed = false;

  const job: Job = {
    freed(bytes, buffer) {
      bytesInFlight -= bytes;
      if (buffer) release(buffer);
      const wake = waiting;
      waiting = undefined;
      wake?.resolve();
    },
    done(hex) {
      result?.resolve(hex);
    },
    failed(error) {
      failure = { error };
      waiting?.reject(error);
      waiting = undefined;
      result?.reject(error);
    },
  };

  const worker = () => {
    if (failure) throw failure.error;
    if (remote === undefined) {
      const entry = pickWorker();
      remote = { entry, id: nextId++ };
      addJob(entry, remote.id, job);
    }
    return remote;
  };

  const send = () => {
    const { entry, id } = worker();
    const buffer = batch!.buffer as ArrayBuffer;
    entry.worker.postMessage({ kind: 'data', id, algorithm, buffer, length: filled }, [buffer]);
    bytesInFlight += filled;
    batch = undefined;
    filled = 0;
  };

  /** Copies the chunks held so far into batches (the first hand-off of the stream). */
  const copyHeld = () => {
    const parts = held;
    held = [];
    heldBytes = 0;
    for (const part of parts) copy(part);
  };

  /** Sends what is held or half-batched, so that a given chunk follows it in order. */
  const sendPending = () => {
    copyHeld();
    if (filled > 0) send();
  };

  const behind = () =>
    bytesInFlight < BYTES_IN_FLIGHT
      ? undefined
      : new Promise<void>((resolve, reject) => (waiting = { resolve, reject }));

  const copy = (chunk: Uint8Array) => {
    let offset = 0;
    while (offset < chunk.byteLength) {
      batch ??= new Uint8Array(takeBuffer());
      const n = Math.min(BATCH_BYTES - filled, chunk.byteLength - offset);
      batch.set(n === chunk.byteLength ? chunk : chunk.subarray(offset, offset + n), filled);
      filled += n;
      offset += n;
      if (filled === BATCH_BYTES) send();
    }
  };

  const update = (chunk: Uint8Array): Promise<void> | undefined => {
    if (failure) throw failure.error;
    // A write that ends after its put failed may still hand its chunks over: nothing to do.
    if (disposed) return undefined;
    if (remote === undefined && batch === undefined) {
      if (heldBytes + chunk.byteLength < BATCH_BYTES) {
        held.push(chunk);
        heldBytes += chunk.byteLength;
        return undefined;
      }
      copyHeld();
    }
    copy(chunk);
    return behind();
  };

  return {
    update,

    give(chunk) {
      if (failure) throw failure.error;
      const buffer = chunk.buffer;
      if (
        disposed ||
        chunk.byteLength < GIVE_MIN_BYTES ||
        chunk.byteOffset !== 0 ||
        chunk.byteLength !== buffer.byteLength ||
        !(buffer instanceof ArrayBuffer)
      )
        return update(chunk);
      sendPending();
      const { entry, id } = worker();
      try {
        entry.worker.postMessage({ kind: 'data', id, algorithm, buffer, length: chunk.byteLength, given: true }, [
          buffer,
        ]);
      } catch {
        // Not transferable (a pooled buffer): copied instead.
        return update(chunk);
      }
      bytesInFlight += chunk.byteLength;
      return behind();
    },

    digest() {
      if (failure) return Promise.reject(failure.error);
      if (remote === undefined && batch === undefined) {
        const hash = createHash(algorithm);
        for (const part of held) hash.update(part);
        held = [];
        return Promise.resolve(hash.digest('hex'));
      }
      if (filled > 0) send();
      const { entry, id } = remote!;
      return new Promise<string>((resolve, reject) => {
        result = { resolve, reject };
        entry.worker.postMessage({ kind: 'end', id, algorithm });
      });
    },

    dispose() {
      if (disposed) return;
      disposed = true;
      held = [];
      if (batch) release(batch.buffer as ArrayBuffer);
      batch = undefined;
      if (remote && remote.entry.jobs.get(remote.id) === job) {
        // Batches still at the worker come back as spares; the worker forgets the hash.
        removeJob(remote.entry, remote.id);
        remote.entry.worker.postMessage({ kind: 'drop', id: remote.id });
      }
    },
  };
}
