import type { ServerResponse } from 'node:http';
import { onDrain } from '../../core/drain.ts';
import { writeLines } from '../../core/stream.ts';
import type { Notifier } from '../../store/notifier/types.ts';
import { Pacer } from '../../core/pacer.ts';
import { SLICE_BYTES, type LogFilters } from './filters.ts';
import type { ChunkBatch, LoggerRepository } from './repository.ts';
import type { Pattern } from './patterns.ts';
import type { LogStats } from './stats.ts';
import type { LogsMetrics } from './routes/deps.ts';

/** Published after every append (`<loggerId>`) and delete (`<loggerId>`): wakes followers everywhere. */
export const LOGS_APPENDED_TOPIC = 'logs.appended';

/** A follower re-checks the store this often even without a wake-up (a missed message costs at most this). */
const FOLLOW_POLL_MS = 1_000;
/** Matching jobs of one stream under way at once: the next slice is matched while one is written. */
const JOBS_AHEAD = 2;
/** Matched bytes gathered before a write, unless WRITE_MS have passed since the last one. */
const WRITE_BYTES = 64 * 1024;
const WRITE_MS = 50;
/** The trailer that ends a stream with its resume cursor (README: Reconnecting). */
export const CURSOR_TRAILER = 'x-logs-cursor';

export interface StreamOptions {
  loggerId: string;
  kind: 'raw' | 'event';
  patterns: Pattern[];
  follow: boolean;
  /** Resume cursor: only chunks after this id are read (0 = from the first retained one). */
  after: number;
}

/**
 * Wake-ups for followers: one notifier subscription per instance, fanned out per logger, so a
 * thousand followers cost one subscription.
 */
export class FollowHub {
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly stop: (() => void)[];

  constructor(private readonly notifier: Notifier) {
    this.stop = [
      notifier.subscribe(LOGS_APPENDED_TOPIC, (loggerId) => this.wake(loggerId)),
      notifier.onResync(() => {
        for (const id of [...this.waiters.keys()]) this.wake(id);
      }),
    ];
  }

  async announce(loggerId: string): Promise<void> {
    await this.notifier.publish(LOGS_APPENDED_TOPIC, loggerId);
  }

  private wake(loggerId: string): void {
    const set = this.waiters.get(loggerId);
    if (!set) return;
    this.waiters.delete(loggerId);
    for (const wake of set) wake();
  }

  /** Resolves on the next append to `loggerId`, after `timeoutMs`, or when `signal` fires. */
  wait(loggerId: string, timeoutMs: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiters.get(loggerId);
      if (!set) this.waiters.set(loggerId, (set = new Set()));
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters.get(loggerId)?.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal.addEventListener('abort', done, { once: true });
      set.add(done);
    });
  }

  close(): void {
    for (const stop of this.stop.splice(0)) stop();
    for (const id of [...this.waiters.keys()]) this.wake(id);
  }
}

/** `data` cut into slices of whole lines, each at most SLICE_BYTES unless one line is longer. */
function* slices(data: Buffer): Generator<Buffer> {
  let start = 0;
  while (start < data.length) {
    let end = data.length;
    if (data.length - start > SLICE_BYTES) {
      const newline = data.indexOf(10, start + SLICE_BYTES - 1);
      if (newline !== -1) end = newline + 1;
    }
    yield start === 0 && end === data.length ? data : data.subarray(start, end);
    start = end;
  }
}

/**
 * Streams a logger's matching lines on a hijacked response: catch-up from the first retained
 * chunk (or the one after `after`), then (with follow) every new chunk, by chunk id, so nothing
 * is lost or repeated at the boundary. Chunks are matched in slices (`filters.ts`: inline between
 * yields when cheap, in a worker thread otherwise), a couple of slices ahead of the writes. Writes
 * wait for 'drain'; the client leaving aborts everything, including the wait. A follower behind
 * retention simply continues from the oldest chunk still there. A stream that ends normally (end
 * of catch-up, logger deleted, instance draining) ends at a chunk boundary with the trailer
 * `x-logs-cursor: <last chunk id>`, which `?after=` resumes from (README: Reconnecting).
 */
export async function runStream(
  res: ServerResponse,
  options: StreamOptions,
  deps: { loggers: LoggerRepository; hub: FollowHub; stats: LogStats; filters: LogFilters; metrics?: LogsMetrics },
): Promise<void> {
  const { loggerId, kind, patterns, follow } = options;
  const controller = new AbortController();
  const onClose = () => controller.abort();
  res.once('close', onClose);
  // A draining instance ends the stream at the next chunk boundary, and stops a follower's wait.
  let draining = false;
  const drained = new AbortController();
  const stopDrain = onDrain(res.req, () => {
    draining = true;
    drained.abort();
  });
  const waitSignal = AbortSignal.any([controller.signal, drained.signal]);
  const counters = deps.stats.of(loggerId);
  counters.openStream(patterns.map((p) => p.source));
  const metrics = deps.metrics;
  metrics?.logsStream(1, follow);
  // Trailers need chunked encoding (an HTTP/1.1 client, or one that sent `TE: chunked`).
  const trailer = res.useChunkedEncodingByDefault;
  res.writeHead(200, {
    'content-type': kind === 'raw' ? 'text/plain; charset=utf-8' : 'application/x-ndjson',
    'cache-control': 'no-store',
    ...(trailer ? { trailer: CURSOR_TRAILER } : {}),
  });
  res.flushHeaders();
  const pacer = new Pacer();
  const ahead: Promise<Buffer>[] = [];
  // Matched pieces are gathered into larger writes: a sparse filter finds a few lines per slice,
  // and a write (a syscall, through the gateway too) per slice cost more than the search.
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let flushedAt = performance.now();
  const flush = async () => {
    flushedAt = performance.now();
    if (pendingBytes === 0 || controller.signal.aborted) return;
    const out = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    counters.bytesSent += out.length;
    metrics?.logsStreamedBytes(out.length);
    await writeLines(res, out, controller.signal);
  };
  const writeNext = async () => {
    const piece = await ahead.shift()!;
    if (piece.length === 0 || controller.signal.aborted) return;
    pending.push(piece);
    pendingBytes += piece.length;
    if (pendingBytes >= WRITE_BYTES || performance.now() - flushedAt >= WRITE_MS) await flush();
  };
  let lastId = options.after;
  let failed = false;
  try {
    // Where reads leave the event loop free (PostgreSQL), the next batch is read while this one is matched.
    let next: Promise<ChunkBatch> | undefined;
    while (!controller.signal.aborted && !draining) {
      const batch = await (next ?? deps.loggers.nextChunks(loggerId, kind, lastId));
      next = undefined;
      const { chunks, more } = batch;
      if (more && deps.loggers.readsAhead && chunks.length > 0) {
        next = deps.loggers.nextChunks(loggerId, kind, chunks.at(-1)!.id);
        next.catch(() => undefined);
      }
      for (const chunk of chunks) {
        // Drained between chunks only, so `lastId` is exactly what the client has been sent.
        if (controller.signal.aborted || draining) break;
        lastId = chunk.id;
        counters.bytesFiltered += chunk.bytes;
        for (const slice of patterns.length === 0 ? [chunk.data] : slices(chunk.data)) {
          if (controller.signal.aborted) break;
          if (pacer.due) await pacer.turn();
          const matched = patterns.length === 0 ? Promise.resolve(slice) : deps.filters.match(slice, kind, patterns);
          matched.catch(() => undefined);
          ahead.push(matched);
          while (ahead.length >= JOBS_AHEAD && !controller.signal.aborted) await writeNext();
        }
      }
      // More to read: the slice under way carries on while the next chunks are read.
      if (more && !draining) continue;
      while (ahead.length > 0 && !controller.signal.aborted) await writeNext();
      await flush();
      if (!follow || draining) break;
      // Register before re-checking, so an append between the check and the wait is not missed.
      const woken = deps.hub.wait(loggerId, FOLLOW_POLL_MS, waitSignal);
      if (await deps.loggers.hasChunkAfter(loggerId, kind, lastId)) continue;
      if ((await deps.loggers.owners(loggerId)) === null) break;
      await woken;
    }
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    stopDrain();
    res.off('close', onClose);
    counters.closeStream();
    metrics?.logsStream(-1, follow);
    // A stream that failed midway is cut off (no final chunk), so the client cannot take it for complete.
    if (!res.destroyed) {
      if (failed) res.destroy();
      else {
        if (trailer && !controller.signal.aborted) res.addTrailers({ [CURSOR_TRAILER]: String(lastId) });
        res.end();
      }
    }
  }
}
