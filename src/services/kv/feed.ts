import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { onDrain } from '../../core/drain.ts';
import { envelope } from '../../core/errors.ts';
import { writeLines } from '../../core/stream.ts';
import type { Notifier } from '../../store/notifier/types.ts';
import { coalesced } from './coalesce.ts';
import { encodeLine, unixSeconds } from './commands.ts';
import type { KvRepository } from './repository.ts';

/** Keep-alive interval of a replication stream (15 s). */
export const PING_INTERVAL_MS = 15_000;
/** Keys read per baseline batch, and log entries per read. */
const BATCH = 1_000;
/** Notifier topics: the log grew; the node's copy was replaced wholesale (children re-baseline). */
const LOG_TOPIC = 'kv.log';
const REBASED_TOPIC = 'kv.rebased';

export interface FeedCounters {
  commandsSent: number;
}

/** A promise and the function that resolves it. */
function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}

interface Subscriber {
  close(): void;
}

/**
 * The parent side of replication: every `/v1/replicate` subscriber gets a baseline (or, with
 * `?since=<seq>`, the log after that seq), a PING, then every logged command in log order.
 *
 * Each subscriber reads the log itself (`id > cursor`), so the database is the one order and the
 * one buffer: a slow child only falls behind in the log, and one that falls behind what was
 * trimmed is cut off and re-subscribes for a baseline. Subscribers sleep between reads until a
 * commit wakes them: this instance's own (`logged`), or another instance's on the same database,
 * through the notifier.
 */
export class ReplicationFeed {
  private readonly subscribers = new Set<Subscriber>();
  private wake = signal();
  private readonly unsubscribe: (() => void)[] = [];
  /** One log notification in flight at a time; commits meanwhile share the next one. */
  private readonly notifyLogged = coalesced(async () => {
    await this.notifier
      ?.publish(LOG_TOPIC, '')
      .catch((error: unknown) => this.logger.warn({ err: error }, 'kv log notification failed'));
  });

  constructor(
    private readonly repository: KvRepository,
    private readonly counters: FeedCounters,
    private readonly logger: FastifyBaseLogger,
    /** Present when other instances write to the same node (PostgreSQL). */
    private readonly notifier: Notifier | undefined,
  ) {
    if (notifier) {
      this.unsubscribe.push(notifier.subscribe(LOG_TOPIC, () => this.wakeAll()));
      this.unsubscribe.push(notifier.subscribe(REBASED_TOPIC, () => this.disconnectLocal()));
      // Messages may have been missed: read again.
      this.unsubscribe.push(notifier.onResync(() => this.wakeAll()));
    }
  }

  get children(): number {
    return this.subscribers.size;
  }

  /** A write that appended to the log has committed: subscribers here and on other instances read on. */
  logged(): void {
    this.wakeAll();
    if (this.notifier) void this.notifyLogged.run();
  }

  /** The node's copy was replaced: every subscriber, on every instance, ends and re-subscribes. */
  rebased(): void {
    this.disconnectLocal();
    if (this.notifier)
      void this.notifier
        .publish(REBASED_TOPIC, '')
        .catch((error: unknown) => this.logger.warn({ err: error }, 'kv rebase notification failed'));
  }

  private wakeAll(): void {
    // Only subscribers hold the wake promise (taken before each read): with none, nothing to wake.
    if (this.subscribers.size === 0) return;
    const woken = this.wake;
    this.wake = signal();
    woken.resolve();
  }

  private disconnectLocal(): void {
    for (const subscriber of [...this.subscribers]) subscriber.close();
  }

  close(): void {
    for (const stop of this.unsubscribe) stop();
    this.disconnectLocal();
  }

  /**
   * Serves one subscription on a hijacked response until the child leaves. `since`: the child's
   * last seq; when the log still holds everything after it the child resumes without a baseline.
   */
  async serve(res: ServerResponse, since: number | undefined, isReplica: boolean): Promise<void> {
    const repository = this.repository;
    const controller = new AbortController();
    const { signal } = controller;
    const subscriber: Subscriber = {
      close: () => {
        controller.abort();
        res.destroy();
      },
    };
    res.once('close', () => controller.abort());
    // A draining instance ends the stream cleanly between lines; the child resumes with ?since (README: Reconnecting).
    let drained = false;
    const stopDrain = onDrain(res.req, () => {
      drained = true;
      controller.abort();
    });
    this.subscribers.add(subscriber);
    try {
      const resumeAfter = since === undefined ? null : await repository.resumePoint(since, isReplica);
      const snapshot = await repository.state();
      if (signal.aborted) return;
      if (isReplica && !snapshot.hasBaseline) {
        // A replica still taking its first baseline would pass on part of one, and its child would
        // count itself complete: the child tries again (README: Reconnecting).
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
        res.end(JSON.stringify(envelope(503, 'service_unavailable', 'this replica has no complete baseline yet')));
        return;
      }
      res.writeHead(200, {
        'content-type': 'application/x-ndjson',
        'cache-control': 'no-store',
        'x-kv-snapshot-seq': String(resumeAfter === null ? snapshot.lastSeq : since),
        ...(resumeAfter === null ? {} : { 'x-kv-resumed': String(since) }),
      });
      const write = (line: string) => writeLines(res, line, signal);
      let cursor: number;
      if (resumeAfter === null) {
        // Keys written during the baseline may show their newer state in it; the log from the
        // snapshot on then replays them, which changes nothing (a key takes only a higher seq).
        cursor = snapshot.lastLogId;
        await this.streamBaseline(write, snapshot.lastSeq, signal);
      } else {
        cursor = resumeAfter;
      }
      if (signal.aborted) return;
      // The end of the baseline (or the start of a resumed stream).
      await write(encodeLine({ type: 'PING', timestamp: unixSeconds() }));
      while (!signal.aborted) {
        // Taken before the read, so a commit between the read and the wait still wakes this loop.
        const woken = this.wake.promise;
        const entries = await repository.logAfter(cursor, BATCH);
        if (signal.aborted) return;
        if (entries.length === 0) {
          if ((await this.sleep(woken, signal)) === 'ping')
            await write(encodeLine({ type: 'PING', timestamp: unixSeconds() }));
          continue;
        }
        if (entries[0]!.id !== cursor + 1) {
          this.logger.warn('kv replica fell behind the log (trimmed or replaced); it will take a new baseline');
          return;
        }
        let text = '';
        for (const entry of entries) text += entry.line;
        cursor = entries[entries.length - 1]!.id;
        this.counters.commandsSent += entries.length;
        await write(text);
      }
    } finally {
      stopDrain();
      this.subscribers.delete(subscriber);
      // Drained before the stream began: no half answer, the child simply subscribes again.
      if (!res.destroyed) {
        if (drained && !res.headersSent) res.destroy();
        else res.end();
      }
    }
  }

  /** Waits for a commit, the end of the subscription, or the keep-alive interval. */
  private sleep(woken: Promise<void>, signal: AbortSignal): Promise<'woken' | 'ping'> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => done('ping'), PING_INTERVAL_MS);
      const onAbort = () => done('woken');
      function done(outcome: 'woken' | 'ping') {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        resolve(outcome);
      }
      signal.addEventListener('abort', onAbort, { once: true });
      void woken.then(() => done('woken'));
    });
  }

  private async streamBaseline(
    write: (line: string) => Promise<void>,
    snapshotSeq: number,
    signal: AbortSignal,
  ): Promise<void> {
    for (const { project, name } of await this.repository.allCollections()) {
      await write(encodeLine({ type: 'BASELINE_BEGIN', project, collection: name, snapshotSeq }));
      let after: string | null = null;
      for (;;) {
        if (signal.aborted) return;
        const batch = await this.repository.baselineBatch(project, name, after, BATCH);
        let text = '';
        for (const entry of batch) {
          text += encodeLine({
            type: 'SET',
            project,
            collection: name,
            seq: entry.seq,
            key: entry.key,
            value: entry.value,
            version: entry.version,
            timestamp: entry.updatedAt,
          });
        }
        this.counters.commandsSent += batch.length;
        if (text) await write(text);
        if (batch.length < BATCH) break;
        after = batch[batch.length - 1]!.key;
      }
      await write(encodeLine({ type: 'BASELINE_END', project, collection: name, snapshotSeq }));
    }
  }
}
