import type { ServiceCalls } from '../context.ts';
import type { LogLine } from './runtime/sandbox.ts';

/** The console lines of one invocation of a lambda that names a logger. */
export interface ConsoleLines {
  invocationId: string;
  lambdaId: string;
  /** The lambda's owner: the lines are ingested as this user. */
  owner: string;
  loggerId: string;
  logs: readonly LogLine[];
}

/** Where `Invoker.execute` hands the console lines of a lambda that names a logger (LoggerIngest). */
export interface ConsoleLineSink {
  /** Queues the lines; never throws and never waits. */
  send(lines: ConsoleLines): void;
}

export interface LoggerIngestOptions {
  /** Text waiting for one lambda's logger beyond this many characters is dropped (default 1 MiB). */
  maxWaitingChars?: number;
  /** One ingest call gives up after this long (default 10 s). */
  callTimeoutMs?: number;
  /** At most one warning per lambda and logger in this long (default 60 s); the others are counted. */
  warnEveryMs?: number;
}

/** Reports a failure off the request path; the context never holds the lines. */
export type IngestWarning = (context: Record<string, unknown>, message: string) => void;

/**
 * The ingest body of one invocation's console lines (README: Invocation history and logs): one
 * line per console line, `<invocation id> <level> <message>\n`; a message with line breaks gives
 * several lines, each with the same prefix.
 */
export function ingestText(invocationId: string, logs: readonly LogLine[]): string {
  let text = '';
  for (const { level, message } of logs)
    for (const line of message.split(/\r?\n/)) text += `${invocationId} ${level} ${line}\n`;
  return text;
}

interface Queue {
  lambdaId: string;
  owner: string;
  loggerId: string;
  /** Text not sent yet, in invocation order. */
  waiting: string[];
  waitingChars: number;
  /** The call in flight, if any: one at a time per lambda and logger, so lines keep their order. */
  sending: Promise<void> | undefined;
  droppedChars: number;
}

/** When a lambda and logger were last warned about, and how many warnings were left out since. */
interface Warned {
  at: number;
  suppressed: number;
}

/** Characters of lines waiting for all lambdas and loggers together; beyond, lines are dropped (and reported). */
const MAX_TOTAL_WAITING_CHARS = 32 * 1024 * 1024;

/**
 * Sends lambdas' console lines to the logger their lambda names, as the lambda's owner, through
 * the logs service's `POST /v1/loggers/{id}/ingest` (README: Invocation history and logs). Off the
 * request path: `send` only queues. Per lambda and logger one call is in flight at a time, and
 * what arrives meanwhile goes in the next call together, so lines stay in order and a busy lambda
 * costs one call per round trip, not one per invocation. A failed call is reported (lambda id,
 * logger id, status or error; never the lines) and its lines dropped.
 */
export class LoggerIngest implements ConsoleLineSink {
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

  /** Queues the lines of one invocation; never throws, never waits. */
  send(lines: ConsoleLines): void {
    if (this.services === undefined || lines.logs.length === 0) return;
    const text = ingestText(lines.invocationId, lines.logs);
    const key = `${lines.lambdaId}\n${lines.loggerId}\n${lines.owner}`;
    let queue = this.queues.get(key);
    if (!queue) {
      queue = {
        lambdaId: lines.lambdaId,
        owner: lines.owner,
        loggerId: lines.loggerId,
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
        this.report(key, queue, { dropped_chars: queue.droppedChars }, 'lambda console lines dropped: too many waited');
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
        this.report(
          key,
          queue,
          { status: answer.status },
          'lambda console lines not ingested: the logger refused them',
        );
    } catch (error) {
      this.report(
        key,
        queue,
        { status: null, error: (error as Error).message },
        'lambda console lines not ingested: the logs service failed',
      );
    }
  }

  /** A warning naming the lambda and the logger, at most one per `warnEveryMs` for each pair. */
  private report(key: string, queue: Queue, context: Record<string, unknown>, message: string): void {
    const now = Date.now();
    const last = this.warned.get(key);
    if (last && now - last.at < this.warnEveryMs) {
      last.suppressed += 1;
      return;
    }
    this.warn(
      { lambda_id: queue.lambdaId, logger_id: queue.loggerId, ...context, suppressed: last?.suppressed ?? 0 },
      message,
    );
    this.warned.set(key, { at: now, suppressed: 0 });
    // Pairs not warned about for a while are forgotten, so the map stays small.
    if (this.warned.size > 1000)
      for (const [k, w] of this.warned) if (now - w.at >= this.warnEveryMs) this.warned.delete(k);
  }
}
