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
  /** The lowercase hex digest of everything added. Call once, after the last update. */
  digest(): Promise<string>;
  /** Forgets the stream (a put that failed); harmless after `digest`. */
  dispose(): void;
}

export type DigestAlgorithm = 'sha256' | 'md5';

/** Bytes per hand-off: ~2,000 messages per GiB; 4 in flight hold 2 MiB per stream. */
const BATCH_BYTES = 512 * 1024;
/** Batches one stream may have at the worker; past this `update` asks the caller to wait. */
const BATCHES_IN_FLIGHT = 4;
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
    parentPort.postMessage({ kind: 'free', id, buffer: message.buffer }, [message.buffer]);
  } else if (kind === 'end') {
    const hash = hashes.get(id) ?? createHash(message.algorithm);
    hashes.delete(id);
    parentPort.postMessage({ kind: 'digest', id, hex: hash.digest('hex') });
  } else if (kind === 'drop') {
    hashes.delete(id);
  }
});
`;

type FromWorker = { kind: 'free'; id: number; buffer: ArrayBuffer } | { kind: 'digest'; id: number; hex: string };

interface Job {
  freed(buffer: ArrayBuffer): void;
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
      if (job) job.freed(message.buffer);
      else release(message.buffer);
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
  let inFlight = 0;
  let failure: { error: unknown } | undefined;
  let waiting: { resolve(): void; reject(error: unknown): void } | undefined;
  let result: { resolve(hex: string): void; reject(error: unknown): void } | undefined;
  let disposed = false;

  const job: Job = {
    freed(buffer) {
      inFlight -= 1;
      release(buffer);
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

  const send = () => {
    if (failure) throw failure.error;
    if (remote === undefined) {
      const entry = pickWorker();
      remote = { entry, id: nextId++ };
      addJob(entry, remote.id, job);
    }
    const buffer = batch!.buffer as ArrayBuffer;
    remote.entry.worker.postMessage({ kind: 'data', id: remote.id, algorithm, buffer, length: filled }, [buffer]);
    inFlight += 1;
    batch = undefined;
    filled = 0;
  };

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

  return {
    update(chunk) {
      if (failure) throw failure.error;
      if (remote === undefined && batch === undefined) {
        if (heldBytes + chunk.byteLength < BATCH_BYTES) {
          held.push(chunk);
          heldBytes += chunk.byteLength;
          return undefined;
        }
        const parts = held;
        held = [];
        heldBytes = 0;
        for (const part of parts) copy(part);
      }
      copy(chunk);
      if (inFlight < BATCHES_IN_FLIGHT) return undefined;
      return new Promise<void>((resolve, reject) => (waiting = { resolve, reject }));
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
