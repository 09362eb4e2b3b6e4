import type { ServiceCalls } from './context.ts';

/**
 * Whether `loggerId` is a logger `owner` has, asked of the logs service as that user: 200 →
 * `owned`; 400, 403 or 404 → `not_owned`; no service calls, a failed call or any other answer →
 * `unreachable`. A service that sends lines to a user's logger checks it with this when it is set.
 */
export async function loggerOwnership(
  services: ServiceCalls | undefined,
  owner: string,
  loggerId: string,
): Promise<'owned' | 'not_owned' | 'unreachable'> {
  if (!services) return 'unreachable';
  let status: number;
  try {
    const answer = await services.call('logs', {
      method: 'GET',
      path: `/v1/loggers/${encodeURIComponent(loggerId)}`,
      identity: { user: { id: owner } },
      maxBodyBytes: 64 * 1024,
    });
    status = answer.status;
  } catch {
    return 'unreachable';
  }
  if (status === 200) return 'owned';
  return status === 400 || status === 403 || status === 404 ? 'not_owned' : 'unreachable';
}

/** Lines for one logger, from one source. */
export interface IngestText {
  /** What the lines come from, as warnings name it: `{ lambda_id }`, `{ repository }`. */
  source: Record<string, string>;
  /** What they are, in warnings: "lambda console lines", "container output". */
  what: string;
  /** The lines are ingested as this user (the logger must be theirs). */
  owner: string;
  loggerId: string;
  /** Whole lines, each ending in a line break. */
  text: string;
}

export interface LoggerIngestOptions {
  /** Text waiting for one source's logger beyond this many characters is dropped (default 1 MiB). */
  maxWaitingChars?: number;
  /** One ingest call gives up after this long (default 10 s). */
  callTimeoutMs?: number;
  /** At most one warning per source and logger in this long (default 60 s); the others are counted. */
  warnEveryMs?: number;
}

/** Reports a failure off the request path; the context never holds the lines. */
export type IngestWarning = (context: Record<string, unknown>, message: string) => void;

interface Queue {
  source: Record<string, string>;
  what: string;
  owner: string;
  loggerId: string;
  /** Text not sent yet, in invocation order. */
  waiting: string[];
  waitingChars: number;
  /** The call in flight, if any: one at a time per lambda and logger, so lines keep their order. */
  sending: Promise<void> | undefined;
  droppedChars: number;
}

/** When a source and logger were last warned about, and how many warnings were left out since. */
interface Warned {
  at: number;
  suppressed: number;
}

/** Characters of lines waiting for all sources and loggers together; beyond, lines are dropped (and reported). */
const MAX_TOTAL_WAITING_CHARS = 32 * 1024 * 1024;

/**
 * Sends lines to a logger as a user, through the logs service's `POST /v1/loggers/{id}/ingest`
 * (lambda console lines, container output). Off the request path: `ingest` only queues. Per
 * source and logger one call is in flight at a time, and what arrives meanwhile goes in the next
 * call together, so lines stay in order and a busy source costs one call per round trip. A failed
 * call is reported (source, logger id, status or error; never the lines) and its lines dropped.
 */
export class LoggerTextIngest {
  private readonly queues = new Map<string, Queue>();
  /** Characters waiting in every queue together (bounded by MAX_TOTAL_WAITING_CHARS). */
  private totalChars = 0;
  private readonly warned = new Map<string, Warned>();
  private readonly maxWaitingChars: number;
  private readonly callTimeoutMs: number;
  private readonly warnEveryMs: number;

  constructor(
    private readonly services: ServiceCalls | undefined,
    private readonly warn: IngestWarning,
    options: LoggerIngestOptions = {},
  ) {
    this.maxWaitingChars = options.maxWaitingChars ?? 1024 * 1024;
    this.callTimeoutMs = options.callTimeoutMs ?? 10_000;
    this.warnEveryMs = options.warnEveryMs ?? 60_000;
  }

  /** Queues lines (each ending in a line break); never throws, never waits. */
  ingest(entry: IngestText): void {
    const text = entry.text;
    if (this.services === undefined || text === '') return;
    const key = `${JSON.stringify(entry.source)}\n${entry.loggerId}\n${entry.owner}`;
    let queue = this.queues.get(key);
    if (!queue) {
      queue = {
        source: entry.source,
        what: entry.what,
        owner: entry.owner,
        loggerId: entry.loggerId,
        waiting: [],
        waitingChars: 0,
        sending: undefined,
        droppedChars: 0,
      };
      this.queues.set(key, queue);
    }
    if (
      queue.waitingChars + text.length > this.maxWaitingChars ||
      this.totalChars + text.length > MAX_TOTAL_WAITING_CHARS
    ) {
      queue.droppedChars += text.length;
      return;
    }
    queue.waiting.push(text);
    queue.waitingChars += text.length;
    this.totalChars += text.length;
    queue.sending ??= this.pump(key, queue);
  }

  /** Waits until every queued line has been sent (or has failed). */
  async flush(): Promise<void> {
    while (this.queues.size > 0) await Promise.all([...this.queues.values()].map((queue) => queue.sending));
  }

  /** Sends what waits, one call at a time, until nothing does; then forgets the queue. */
  private async pump(key: string, queue: Queue): Promise<void> {
    try {
      // Let the invocation's answer go first.
      await new Promise<void>((resolve) => setImmediate(resolve));
      while (queue.waiting.length > 0) {
        const body = queue.waiting.join('');
        queue.waiting = [];
        this.totalChars -= queue.waitingChars;
        queue.waitingChars = 0;
        await this.call(key, queue, body);
      }
      if (queue.droppedChars > 0) {
        this.report(key, queue, { dropped_chars: queue.droppedChars }, `${queue.what} dropped: too many waited`);
        queue.droppedChars = 0;
      }
    } finally {
      // In the same turn as the last look at `waiting`: a later send starts a new queue.
      this.queues.delete(key);
    }
  }

  private async call(key: string, queue: Queue, body: string): Promise<void> {
    try {
      const answer = await this.services!.call('logs', {
        method: 'POST',
        path: `/v1/loggers/${encodeURIComponent(queue.loggerId)}/ingest`,
        identity: { user: { id: queue.owner } },
        headers: { 'content-type': 'text/plain; charset=utf-8' },
        body,
        signal: AbortSignal.timeout(this.callTimeoutMs),
        maxBodyBytes: 64 * 1024,
      });
      if (answer.status !== 200)
        this.report(key, queue, { status: answer.status }, `${queue.what} not ingested: the logger refused them`);
    } catch (error) {
      this.report(
        key,
        queue,
        { status: null, error: (error as Error).message },
        `${queue.what} not ingested: the logs service failed`,
      );
    }
  }

  /** A warning naming the source and the logger, at most one per `warnEveryMs` for each pair. */
  private report(key: string, queue: Queue, context: Record<string, unknown>, message: string): void {
    const now = Date.now();
    const last = this.warned.get(key);
    if (last && now - last.at < this.warnEveryMs) {
      last.suppressed += 1;
      return;
    }
    this.warn({ ...queue.source, logger_id: queue.loggerId, ...context, suppressed: last?.suppressed ?? 0 }, message);
    this.warned.set(key, { at: now, suppressed: 0 });
    // Pairs not warned about for a while are forgotten, so the map stays small.
    if (this.warned.size > 1000)
      for (const [k, w] of this.warned) if (now - w.at >= this.warnEveryMs) this.warned.delete(k);
  }
}
