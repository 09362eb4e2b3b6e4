import type http from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { BadLineError, decodeLine, type Command, type StreamLine } from './commands.ts';
import { PING_INTERVAL_MS, type ReplicationFeed } from './feed.ts';
import { requestParent } from './parent.ts';
import { LeaseLostError, type KvRepository } from './repository.ts';

function isCommand(line: StreamLine): line is Command {
  return (
    line.type === 'SET' ||
    line.type === 'DELETE' ||
    line.type === 'CREATE_COLLECTION' ||
    line.type === 'DROP_COLLECTION'
  );
}

export interface FollowerOptions {
  parentUrl: string;
  headers: Record<string, string>;
  /** No line for this long means the parent is gone (three ping intervals). */
  silenceMs?: number;
  /** Reconnect back-off: first delay, doubling up to the maximum (0.5 s to 30 s). */
  backoffMs?: number;
  maxBackoffMs?: number;
}

export interface FollowerCounters {
  commandsReceived: number;
}

/**
 * The replica side of replication: subscribes to the parent's `/v1/replicate`,
 * applies its baseline and live commands, passes them on to this node's own children, and
 * reconnects with back-off when the stream breaks. With a complete local copy it asks to resume
 * after its last seq (`?since=`), and the parent sends a baseline only when its log cannot.
 */
export class ParentFollower {
  /** Connected to the parent and holding a complete copy from this connection. */
  ready = false;
  connected = false;
  /** Called when `connected` or `ready` changes (the lease records them for other instances). */
  onChange: () => void = () => {};
  /**
   * The newest `timestamp` (Unix seconds) of a command or ping from the parent since this follower
   * started, null before the first: now minus it is the replica's lag (README.md: Metrics).
   */
  newestTimestamp: number | null = null;
  private stopped = true;
  private request: http.ClientRequest | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private delay: number;

  constructor(
    private readonly repository: KvRepository,
    /** This instance's name in the follower lease: only its holder applies what the parent sends. */
    private readonly holder: string,
    private readonly feed: ReplicationFeed,
    private readonly counters: FollowerCounters,
    private readonly options: FollowerOptions,
    private readonly logger: FastifyBaseLogger,
  ) {
    this.delay = options.backoffMs ?? 500;
  }

  get running(): boolean {
    return !this.stopped;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.delay = this.options.backoffMs ?? 500;
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.request?.destroy();
  }

  private connect(): void {
    if (this.stopped) return;
    this.repository.state().then(
      (state) => this.subscribe(state.hasBaseline ? `?since=${state.lastSeq}` : ''),
      (error: unknown) => {
        this.logger.warn({ err: error }, 'kv node state unreadable; retrying');
        this.retry();
      },
    );
  }

  private retry(): void {
    if (this.stopped) return;
    this.retryTimer = setTimeout(() => this.connect(), this.delay);
    this.retryTimer.unref();
    this.delay = Math.min(this.delay * 2, this.options.maxBackoffMs ?? 30_000);
  }

  private subscribe(since: string): void {
    if (this.stopped) return;
    const request = requestParent(this.options.parentUrl, 'POST', `/v1/replicate${since}`, {
      ...this.options.headers,
      'content-type': 'application/json',
      'content-length': '0',
    });
    this.request = request;
    let silence: NodeJS.Timeout | undefined;
    const silenceMs = this.options.silenceMs ?? 3 * PING_INTERVAL_MS;
    const heard = () => {
      if (silence) clearTimeout(silence);
      silence = setTimeout(() => {
        this.logger.warn({ parent: this.options.parentUrl }, 'kv parent silent; reconnecting');
        request.destroy();
      }, silenceMs);
      silence.unref();
    };
    let finished = false;
    const finish = (reason: string) => {
      if (finished) return;
      finished = true;
      if (silence) clearTimeout(silence);
      const wasReady = this.ready;
      const changed = this.ready || this.connected;
      this.ready = false;
      this.connected = false;
      if (changed) this.onChange();
      if (this.stopped) return;
      if (wasReady)
        this.logger.warn({ parent: this.options.parentUrl, reason }, 'kv parent connection lost; reconnecting');
      this.retry();
    };
    request.on('error', (error) => finish(error.message));
    request.on('close', () => finish('closed'));
    request.on('response', (res) => {
      if (res.statusCode !== 200) {
        this.logger.warn(
          { parent: this.options.parentUrl, status: res.statusCode },
          'kv parent refused the subscription',
        );
        res.resume();
        request.destroy();
        return;
      }
      this.connected = true;
      this.onChange();
      heard();
      const resumed = res.headers['x-kv-resumed'] !== undefined;
      const snapshotSeq = Number(res.headers['x-kv-snapshot-seq'] ?? NaN);
      void this.consume(res, resumed, snapshotSeq, heard)
        .then(() => request.destroy())
        .catch((error: unknown) => {
          if (error instanceof LeaseLostError) {
            this.logger.info('kv follower lease taken over by another instance; stopping here');
            this.stop();
          } else {
            this.logger.warn({ err: error, parent: this.options.parentUrl }, 'kv replication stream failed');
          }
          request.destroy();
        });
    });
    request.end();
  }

  /** Reads NDJSON lines, a chunk at a time: every command of a chunk joins one group commit. */
  private async consume(
    res: http.IncomingMessage,
    resumed: boolean,
    headerSnapshotSeq: number,
    heard: () => void,
  ): Promise<void> {
    let baseline: { mark: number; snapshotSeq: number } | null = null;
    if (!resumed)
      baseline = {
        mark: await this.repository.beginBaseline(this.holder),
        snapshotSeq: Number.isSafeInteger(headerSnapshotSeq) ? headerSnapshotSeq : -1,
      };
    let rest = '';
    res.setEncoding('utf8');
    for await (const chunk of res as AsyncIterable<string>) {
      heard();
      const text = rest + chunk;
      const lines = text.split('\n');
      rest = lines.pop() ?? '';
      const work: Promise<unknown>[] = [];
      const applied: Promise<void>[] = [];
      for (const raw of lines) {
        if (raw.trim() === '') continue;
        const line = decodeLine(raw);
        if (line.type !== 'PING') this.counters.commandsReceived++;
        if (baseline) {
          const done = await this.baselineLine(line, baseline, work);
          if (done) {
            await Promise.all(work);
            work.length = 0;
            const lastSeq = await this.repository.finishBaseline(
              baseline.snapshotSeq < 0 ? null : baseline.snapshotSeq,
              baseline.mark,
              this.holder,
            );
            baseline = null;
            this.becomeReady(lastSeq);
            // This node's copy changed wholesale: its children take a new baseline from it.
            this.feed.rebased();
          }
          continue;
        }
        if (line.type === 'PING') {
          this.heard(line.timestamp);
          if (!this.ready) this.becomeReady((await this.repository.state()).lastSeq);
          continue;
        }
        if (!isCommand(line)) throw new BadLineError(`${line.type} outside a baseline`);
        this.heard(line.timestamp);
        applied.push(this.repository.applyFromParent(line, this.holder));
      }
      await Promise.all(work);
      if (applied.length > 0) {
        await Promise.all(applied);
        this.feed.logged();
      }
    }
  }

  /** One baseline line; true when it ends the baseline (the first PING). */
  private async baselineLine(
    line: StreamLine,
    baseline: { mark: number; snapshotSeq: number },
    work: Promise<unknown>[],
  ): Promise<boolean> {
    switch (line.type) {
      case 'BASELINE_BEGIN':
        baseline.snapshotSeq = Math.max(baseline.snapshotSeq, line.snapshotSeq);
        work.push(this.repository.baselineCollection(line.project, line.collection, baseline.mark));
        return false;
      case 'SET':
        work.push(this.repository.baselineKey(line, baseline.mark));
        return false;
      case 'BASELINE_END':
        // Its keys must be in before the ones not in the baseline are removed.
        await Promise.all(work);
        work.length = 0;
        await this.repository.endBaselineCollection(line.project, line.collection, baseline.mark);
        return false;
      case 'PING':
        return true;
      default:
        throw new BadLineError(`${line.type} inside a baseline`);
    }
  }

  private heard(timestamp: number): void {
    if (this.newestTimestamp === null || timestamp > this.newestTimestamp) this.newestTimestamp = timestamp;
  }

  private becomeReady(lastSeq: number): void {
    this.ready = true;
    this.onChange();
    this.delay = this.options.backoffMs ?? 500;
    this.logger.info({ parent: this.options.parentUrl, lastSeq }, 'kv replica in step with its parent');
  }
}
