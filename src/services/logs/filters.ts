import { availableParallelism } from 'node:os';
import { LogsErrors } from './errors.ts';
import { parseEvents, type StoredEvent } from './events.ts';
import { matchCandidates, matchLines } from './matching.ts';
import type { Pattern } from './patterns.ts';
import { WorkerPool, WorkerTimeLimitError, startWorker } from '../../core/worker-pool.ts';

/**
 * Work whose cost a request chooses (matching lines against its patterns, parsing its events
 * body) is kept off the event loop: small pieces run inline between yields, the rest in worker
 * threads under a time limit. So one request can make itself slow, never the process.
 */

/** Most bytes of stored lines in one matching job (a longer line is a job of its own). */
export const SLICE_BYTES = 1024 * 1024;
/**
 * Matching runs inline when bytes × (1 + RE2 instructions of all patterns) is at most this: a few
 * milliseconds even at RE2's slowest (a few nanoseconds per byte and instruction).
 */
const INLINE_COST = 1 << 20;
/**
 * With a needle (a literal every matching line holds), a slice is searched on the event loop at
 * memory speed, and only the lines around hits are tested: inline while they are at most this
 * many, holding at most INLINE_COST / program bytes (otherwise the worker does the same).
 */
const INLINE_CANDIDATE_LINES = 1024;
/** Event bodies up to this size are parsed inline (about a millisecond per 100 KB). */
const INLINE_EVENTS_BYTES = 256 * 1024;
/** Time a worker may spend per MiB of a job (at least one MiB's worth): 10 s is 100 KB/s. */
export const JOB_MS_PER_MIB = 10_000;
const POOL_SIZE = Math.max(1, Math.min(4, availableParallelism() - 1));

export type FilterRequest =
  | { op: 'match'; kind: 'raw' | 'event'; sources: string[]; data: Uint8Array }
  | { op: 'events'; body: Uint8Array; contentType: string | undefined; ts: string };

export type FilterReply =
  { ok: true; bytes: Uint8Array; count: number } | { ok: false; status: number; code: string; message: string };

/** A job took longer than its time limit: the request asked for more work than is allowed. */
export class FilterTimeLimitError extends Error {
  override readonly name = 'FilterTimeLimitError';
}

/** The stored form of events: one JSON line each, in a buffer that owns its memory. */
export function encodeEvents(events: readonly StoredEvent[]): Uint8Array {
  const text = events.map((event) => `${JSON.stringify(event)}\n`).join('');
  const bytes = new Uint8Array(Buffer.byteLength(text));
  Buffer.from(bytes.buffer).write(text);
  return bytes;
}

/** A copy that owns its whole ArrayBuffer (a view of a larger one cannot be moved to a thread alone). */
function standalone(bytes: Uint8Array): Uint8Array {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer)
    return bytes;
  return new Uint8Array(bytes);
}

const limitFor = (bytes: number) => Math.ceil(Math.max(1, bytes / (1024 * 1024)) * JOB_MS_PER_MIB);

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export class LogFilters {
  private readonly pool = new WorkerPool(() => startWorker(import.meta.url, 'filter-worker'), POOL_SIZE);

  /**
   * The matching lines of `slice` (whole stored lines) as stored. Inline when cheap (the caller
   * paces itself with a Pacer), otherwise in a worker. Rejects with FilterTimeLimitError when
   * a worker needs more than JOB_MS_PER_MIB per MiB.
   */
  async match(slice: Buffer, kind: 'raw' | 'event', patterns: readonly Pattern[]): Promise<Buffer> {
    const program = patterns.reduce((sum, pattern) => sum + pattern.program, 1);
    if (slice.length * program <= INLINE_COST) return asBuffer(matchLines(slice, kind, patterns));
    if (slice.length <= 2 * SLICE_BYTES) {
      const quick = matchCandidates(slice, kind, patterns, INLINE_CANDIDATE_LINES, INLINE_COST / program);
      if (quick !== null) return asBuffer(quick);
    }
    const data = standalone(slice);
    const reply = await this.inWorker(
      { op: 'match', kind, sources: patterns.map((p) => p.source), data },
      data,
      slice.length,
    );
    return asBuffer(reply.bytes);
  }

  /** Parses an events body (all or nothing, README: events) into its stored form. */
  async parseEvents(
    body: Buffer,
    contentType: string | undefined,
    ts: string,
  ): Promise<{ data: Buffer; count: number }> {
    if (body.length <= INLINE_EVENTS_BYTES) {
      const events = parseEvents(body, contentType, ts);
      return { data: asBuffer(encodeEvents(events)), count: events.length };
    }
    // A copy: the request's own body must stay readable (its length is the answer's `bytes`).
    const copy = new Uint8Array(body);
    const reply = await this.inWorker({ op: 'events', body: copy, contentType, ts }, copy, body.length);
    return { data: asBuffer(reply.bytes), count: reply.count };
  }

  private async inWorker(
    request: FilterRequest,
    moved: Uint8Array,
    bytes: number,
  ): Promise<{ bytes: Uint8Array; count: number }> {
    let reply: FilterReply;
    try {
      reply = await this.pool.run<FilterReply>(request, [moved.buffer as ArrayBuffer], limitFor(bytes));
    } catch (error) {
      if (error instanceof WorkerTimeLimitError) {
        throw new FilterTimeLimitError(`work on ${bytes} bytes took longer than ${limitFor(bytes)} ms`);
      }
      throw error;
    }
    if (!reply.ok) throw LogsErrors.fromWorker(reply.status, reply.code, reply.message);
    return reply;
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
