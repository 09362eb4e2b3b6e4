import type { ServerResponse } from 'node:http';
import { writeLines } from '../../core/stream.ts';
import type { FastifyBaseLogger } from 'fastify';
import { encodeLine, unixSeconds } from './commands.ts';
import type { KvStorage } from './storage.ts';

/** Keep-alive interval of a replication stream (15 s). */
export const PING_INTERVAL_MS = 15_000;
/** Keys read per baseline batch, and log entries per catch-up read. */
const BATCH = 1_000;
/** A child this far behind (bytes queued while its socket is full) is cut off and re-subscribes. */
const MAX_QUEUED_BYTES = 16 * 1024 * 1024;
/** A log id that never arrives (a write that failed after commit) is skipped after this long. */
const ORDER_GAP_MS = 1_000;

export interface FeedCounters {
  commandsSent: number;
}

interface Subscriber {
  res: ServerResponse;
  /** The last log id this child was sent (or holds through its baseline). */
  cursor: number;
  /** Live: lines go straight to the socket; otherwise they wait in `queue` until catch-up ends. */
  live: boolean;
  queue: { id: number; line: string }[];
  queuedBytes: number;
  close(): void;
}

/**
 * The parent side of replication: every `/v1/replicate` subscriber gets a
 * baseline (or, with `?since=<seq>`, the log after that seq), a PING, then every applied command
 * in log order. Commands are published by log id after their commit; a small reorder buffer keeps
 * the order even when commits' continuations run out of turn.
 */
export class ReplicationFeed {
  private readonly subscribers = new Set<Subscriber>();
  private readonly pending = new Map<number, string>();
  private expected: number;
  private gapTimer: NodeJS.Timeout | undefined;
  private readonly pingTimer: NodeJS.Timeout;

  constructor(
    private readonly storage: KvStorage,
    private readonly counters: FeedCounters,
    private readonly logger: FastifyBaseLogger,
  ) {
    this.expected = storage.lastLogId + 1;
    this.pingTimer = setInterval(() => this.pingAll(), PING_INTERVAL_MS);
    this.pingTimer.unref();
  }

  get children(): number {
    return this.subscribers.size;
  }

  /** A committed log entry: delivered to every subscriber in id order. */
  publish(logId: number, line: string): void {
    if (logId < this.expected) return;
    this.pending.set(logId, line);
    this.drainPending();
  }

  private drainPending(): void {
    for (let line = this.pending.get(this.expected); line !== undefined; line = this.pending.get(this.expected)) {
      this.pending.delete(this.expected);
      this.deliver(this.expected, line);
      this.expected++;
    }
    if (this.pending.size > 0 && !this.gapTimer) {
      this.gapTimer = setTimeout(() => {
        this.gapTimer = undefined;
        if (this.pending.size === 0) return;
        const next = Math.min(...this.pending.keys());
        this.logger.warn({ missing: this.expected, next }, 'kv replication log id never published; skipping');
        this.expected = next;
        this.drainPending();
      }, ORDER_GAP_MS);
      this.gapTimer.unref();
    }
  }

  private deliver(id: number, line: string): void {
    for (const subscriber of this.subscribers) {
      if (!subscriber.live) {
        subscriber.queue.push({ id, line });
        continue;
      }
      this.send(subscriber, id, line);
    }
  }

  private send(subscriber: Subscriber, id: number, line: string): void {
    if (id <= subscriber.cursor) return;
    subscriber.cursor = id;
    if (subscriber.queue.length > 0 || subscriber.res.writableNeedDrain) {
      subscriber.queue.push({ id, line });
      subscriber.queuedBytes += line.length;
      if (subscriber.queuedBytes > MAX_QUEUED_BYTES) {
        this.logger.warn('kv replica too slow to keep up; disconnecting it');
        subscriber.close();
      }
      return;
    }
    this.counters.commandsSent++;
    subscriber.res.write(line);
  }

  private pingAll(): void {
    const line = encodeLine({ type: 'PING', timestamp: unixSeconds() });
    for (const subscriber of this.subscribers) if (subscriber.live && subscriber.queuedBytes === 0 && !subscriber.res.writableNeedDrain) subscriber.res.write(line);
  }

  /** Ends every subscription: children reconnect (after this node took a new baseline of its own). */
  disconnectAll(): void {
    for (const subscriber of [...this.subscribers]) subscriber.close();
  }

  close(): void {
    clearInterval(this.pingTimer);
    if (this.gapTimer) clearTimeout(this.gapTimer);
    this.disconnectAll();
  }

  /**
   * Serves one subscription on a hijacked response until the child leaves. `since`: the child's
   * last seq; when the log still holds everything after it the child resumes without a baseline.
   */
  async serve(res: ServerResponse, since: number | undefined, isReplica: boolean): Promise<void> {
    const storage = this.storage;
    const controller = new AbortController();
    const subscriber: Subscriber = {
      res,
      cursor: 0,
      live: false,
      queue: [],
      queuedBytes: 0,
      close: () => {
        controller.abort();
        res.destroy();
      },
    };
    const onDrain = () => this.flushQueue(subscriber);
    res.on('drain', onDrain);
    res.once('close', () => controller.abort());
    // Registered first, so nothing committed from here on can be missed.
    this.subscribers.add(subscriber);
    try {
      const resumeAfter = since === undefined ? null : storage.resumePoint(since, isReplica);
      const snapshotSeq = storage.lastSeq;
      const snapshotLogId = storage.lastLogId;
      res.writeHead(200, {
        'content-type': 'application/x-ndjson',
        'cache-control': 'no-store',
        'x-kv-snapshot-seq': String(resumeAfter === null ? snapshotSeq : since),
        ...(resumeAfter === null ? {} : { 'x-kv-resumed': String(since) }),
      });
      const write = (line: string) => writeLines(res, line, controller.signal);
      if (resumeAfter === null) {
        subscriber.cursor = snapshotLogId;
        await this.streamBaseline(write, snapshotSeq, controller.signal);
      } else {
        subscriber.cursor = resumeAfter;
      }
      if (controller.signal.aborted) return;
      // The end of the baseline (or the start of a resumed stream).
      await write(encodeLine({ type: 'PING', timestamp: unixSeconds() }));
      // Catch up from the log until it holds nothing newer, then go live in the same turn.
      for (;;) {
        if (controller.signal.aborted) return;
        const entries = storage.logAfter(subscriber.cursor, BATCH);
        if (entries.length === 0) break;
        if (entries[0]!.id !== subscriber.cursor + 1 && subscriber.cursor < storage.trimmedThrough) {
          this.logger.warn('kv replica fell behind the trimmed log; it will take a new baseline');
          return;
        }
        for (const entry of entries) {
          subscriber.cursor = entry.id;
          this.counters.commandsSent++;
          await write(entry.line);
        }
      }
      // What was published meanwhile is in the log too, so only entries past the cursor remain.
      subscriber.queue = subscriber.queue.filter((item) => item.id > subscriber.cursor);
      subscriber.queuedBytes = subscriber.queue.reduce((sum, item) => sum + item.line.length, 0);
      subscriber.cursor = subscriber.queue.at(-1)?.id ?? subscriber.cursor;
      subscriber.live = true;
      this.flushQueue(subscriber);
      await new Promise<void>((resolve) => {
        if (controller.signal.aborted) resolve();
        else controller.signal.addEventListener('abort', () => resolve(), { once: true });
      });
    } finally {
      this.subscribers.delete(subscriber);
      res.off('drain', onDrain);
      if (!res.destroyed) res.end();
    }
  }

  private async streamBaseline(write: (line: string) => Promise<void>, snapshotSeq: number, signal: AbortSignal): Promise<void> {
    for (const { project, name } of this.storage.allCollections()) {
      await write(encodeLine({ type: 'BASELINE_BEGIN', project, collection: name, snapshotSeq }));
      let after: string | null = null;
      for (;;) {
        if (signal.aborted) return;
        const batch = this.storage.baselineBatch(project, name, after, BATCH);
        let text = '';
        for (const entry of batch) {
          text += encodeLine({ type: 'SET', project, collection: name, seq: entry.seq, key: entry.key, value: entry.value, version: entry.version, timestamp: entry.updatedAt });
        }
        this.counters.commandsSent += batch.length;
        if (text) await write(text);
        if (batch.length < BATCH) break;
        after = batch[batch.length - 1]!.key;
      }
      await write(encodeLine({ type: 'BASELINE_END', project, collection: name, snapshotSeq }));
    }
  }

  /** Writes what queued up while the socket was full, until it fills again. */
  private flushQueue(subscriber: Subscriber): void {
    if (!subscriber.live) return;
    while (subscriber.queue.length > 0 && !subscriber.res.writableNeedDrain) {
      const item = subscriber.queue.shift()!;
      subscriber.queuedBytes -= item.line.length;
      this.counters.commandsSent++;
      subscriber.res.write(item.line);
    }
  }
}
