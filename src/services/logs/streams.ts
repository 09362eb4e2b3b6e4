import type { ServerResponse } from 'node:http';
import { drained } from '../../core/stream.ts';
import { isUtf8 } from 'node:buffer';
import type { Notifier } from '../../store/notifier/types.ts';
import type { LoggerRepository } from './loggers.ts';
import { matchesAll, type Pattern } from './patterns.ts';
import type { LogStats } from './stats.ts';

/** Published after every append (`<loggerId>`) and delete (`<loggerId>`): wakes followers everywhere. */
export const LOGS_APPENDED_TOPIC = 'logs.appended';

/** Chunks read per query while catching up (few: one chunk can be a whole 64 MiB ingest). */
const CHUNKS_PER_READ = 2;
/** A follower re-checks the store this often even without a wake-up (a missed message costs at most this). */
const FOLLOW_POLL_MS = 1_000;
/** Output buffered before a write. */
const WRITE_AT_BYTES = 64 * 1024;

export interface StreamOptions {
  loggerId: string;
  kind: 'raw' | 'event';
  patterns: Pattern[];
  follow: boolean;
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

/** The text a pattern is tested against: a raw line without its `\n`; an event's message. */
function eventMessage(line: string): string {
  try {
    const value = JSON.parse(line) as { message?: unknown };
    return typeof value.message === 'string' ? value.message : '';
  } catch {
    return '';
  }
}

/** The matching lines of one chunk, as stored. */
function matchChunk(data: Buffer, kind: 'raw' | 'event', patterns: readonly Pattern[]): Buffer[] {
  if (patterns.length === 0) return [data];
  // A literal missing from the whole chunk rules out every line of it.
  for (const pattern of patterns) {
    if (pattern.literal !== null && data.indexOf(pattern.literal) === -1) return [];
    if (pattern.anyOf !== null && pattern.anyOf.every((alternative) => data.indexOf(alternative) === -1)) return [];
  }
  const out: Buffer[] = [];
  if (isUtf8(data)) {
    const text = data.toString('utf8');
    let start = 0;
    let pending = '';
    while (start < text.length) {
      let end = text.indexOf('\n', start);
      if (end === -1) end = text.length;
      const line = text.slice(start, end);
      if (matchesAll(patterns, kind === 'raw' ? line : eventMessage(line))) pending += `${line}\n`;
      start = end + 1;
      if (pending.length >= WRITE_AT_BYTES) {
        out.push(Buffer.from(pending));
        pending = '';
      }
    }
    if (pending) out.push(Buffer.from(pending));
    return out;
  }
  // Not UTF-8: test a decoded copy of each line, send the stored bytes.
  let start = 0;
  while (start < data.length) {
    let end = data.indexOf(10, start);
    if (end === -1) end = data.length;
    const line = data.subarray(start, end).toString('utf8');
    if (matchesAll(patterns, kind === 'raw' ? line : eventMessage(line))) out.push(data.subarray(start, Math.min(end + 1, data.length)));
    start = end + 1;
  }
  return out;
}

/**
 * Streams a logger's matching lines on a hijacked response: catch-up from the first retained
 * chunk, then (with follow) every new chunk, by chunk id, so nothing is lost or repeated at the
 * boundary. Writes wait for 'drain'; the client leaving aborts everything, including the wait.
 * A follower behind retention simply continues from the oldest chunk still there.
 */
export async function runStream(res: ServerResponse, options: StreamOptions, deps: { loggers: LoggerRepository; hub: FollowHub; stats: LogStats }): Promise<void> {
  const { loggerId, kind, patterns, follow } = options;
  const controller = new AbortController();
  const onClose = () => controller.abort();
  res.once('close', onClose);
  const counters = deps.stats.of(loggerId);
  counters.openStream(patterns.map((p) => p.source));
  res.writeHead(200, { 'content-type': kind === 'raw' ? 'text/plain; charset=utf-8' : 'application/x-ndjson', 'cache-control': 'no-store' });
  res.flushHeaders();
  let lastId = 0;
  try {
    while (!controller.signal.aborted) {
      const chunks = await deps.loggers.chunksAfter(loggerId, kind, lastId, CHUNKS_PER_READ);
      for (const chunk of chunks) {
        if (controller.signal.aborted) break;
        lastId = chunk.id;
        counters.bytesFiltered += chunk.bytes;
        for (const piece of matchChunk(chunk.data, kind, patterns)) {
          counters.bytesSent += piece.length;
          if (!res.write(piece)) await drained(res, controller.signal);
          if (controller.signal.aborted) break;
        }
      }
      if (chunks.length === CHUNKS_PER_READ) continue;
      if (!follow) break;
      // Register before re-checking, so an append between the check and the wait is not missed.
      const woken = deps.hub.wait(loggerId, FOLLOW_POLL_MS, controller.signal);
      if ((await deps.loggers.chunksAfter(loggerId, kind, lastId, 1)).length > 0) continue;
      if ((await deps.loggers.owners(loggerId)) === null) break;
      await woken;
    }
  } finally {
    res.off('close', onClose);
    counters.closeStream();
    if (!res.destroyed) res.end();
  }
}
