// Streaming responses (NDJSON and Server-Sent Events) written straight to a Node response. Fastify
// handlers call `reply.hijack()` and pass `reply.raw`; a plain `http.ServerResponse` works the same.
//
// The writers give producers two things Node's raw API makes easy to get wrong: back-pressure
// (write() waits for 'drain') and a disconnect signal (so work stops when nobody is listening).

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** The stream cannot be written: the client disconnected or `end()` was called. */
export class StreamClosedError extends Error {
  override name = 'StreamClosedError';

  constructor(message = 'stream closed') {
    super(message);
  }
}

export interface StreamWriter {
  /** True once `end()` was called or the client went away. */
  readonly closed: boolean;
  /** Aborts on client disconnect or `end()`; its reason is a {@link StreamClosedError}. */
  readonly signal: AbortSignal;
  /** Finishes the response. Idempotent; safe after a disconnect. */
  end(): void;
}

export interface NdjsonWriter extends StreamWriter {
  /**
   * Writes one JSON line. Resolves once the chunk is accepted; when the response buffer is full it
   * waits for 'drain'. Rejects with {@link StreamClosedError} when the stream is closed, or with a
   * TypeError for values JSON cannot represent (`undefined`, functions, symbols).
   */
  write(value: unknown): Promise<void>;
}

export interface SseEvent {
  /** Event type (`event:` field); omitted means the browser's default `message`. */
  event?: string;
  /** Strings are sent as-is (split on line breaks); anything else as JSON. */
  data: unknown;
  /** Last-Event-ID for reconnection (`id:` field). */
  id?: string;
  /** Reconnection delay in milliseconds (`retry:` field). */
  retry?: number;
}

export interface SseWriter extends StreamWriter {
  /** Sends one event frame; same back-pressure and closing rules as {@link NdjsonWriter.write}. */
  send(event: SseEvent): Promise<void>;
  /** Sends a comment frame (`: text`), ignored by EventSource; useful as a keep-alive. */
  comment(text: string): Promise<void>;
}

export interface StreamOptions {
  /** HTTP status, default 200. */
  status?: number;
  /** Extra response headers; they override the defaults set by the writer. */
  headers?: Record<string, string>;
  /** Write a heartbeat after this many idle milliseconds; 0 disables. */
  heartbeatMs?: number;
}

const LINE_BREAK = /\r\n|\r|\n/;

/** Shared lifecycle: headers, disconnect detection, back-pressure and the idle heartbeat. */
class ResponseStream implements StreamWriter {
  readonly #res: ServerResponse;
  readonly #socket: Socket | null;
  readonly #abort = new AbortController();
  readonly #heartbeat: string;
  #timer: NodeJS.Timeout | undefined;
  #ended = false;
  #gone = false;
  // One promise shared by every write waiting for the same 'drain'.
  #drain: { promise: Promise<void>; resolve: () => void; reject: (err: Error) => void } | undefined;

  constructor(
    res: ServerResponse,
    defaults: Record<string, string>,
    opts: StreamOptions,
    heartbeat: string,
    heartbeatMs: number,
  ) {
    if (res.headersSent) throw new Error('stream: response headers were already sent');
    this.#res = res;
    this.#heartbeat = heartbeat;
    // Captured now: res.socket is detached once the response finishes.
    this.#socket = res.socket ?? res.req?.socket ?? null;

    res.writeHead(opts.status ?? 200, { ...defaults, ...opts.headers });
    // Send headers now so the client sees the stream open before the first item is ready.
    res.flushHeaders();

    res.on('close', this.#onClose);
    res.on('drain', this.#onDrain);
    this.#socket?.on('close', this.#onClose);

    if (heartbeatMs > 0) {
      this.#timer = setTimeout(this.#onHeartbeat, heartbeatMs);
      // A forgotten stream must not keep the process alive.
      this.#timer.unref();
    }
    if (res.destroyed || this.#socket?.destroyed) this.#onClose();
  }

  get closed(): boolean {
    return this.#ended || this.#gone;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#teardown(new StreamClosedError('stream ended'));
    // Data already accepted will still be flushed by res.end(), so pending writes succeeded.
    this.#drain?.resolve();
    this.#drain = undefined;
    if (!this.#gone && !this.#res.writableEnded) this.#res.end();
  }

  /** Writes a complete frame, honouring back-pressure. */
  protected writeChunk(chunk: string): Promise<void> {
    if (this.closed) return Promise.reject(this.#closedError());
    this.#timer?.refresh(); // the heartbeat is only for idle periods
    if (this.#res.write(chunk)) return Promise.resolve();
    if (this.#drain === undefined) {
      let resolve!: () => void;
      let reject!: (err: Error) => void;
      const promise = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      this.#drain = { promise, resolve, reject };
    }
    return this.#drain.promise;
  }

  #closedError(): StreamClosedError {
    return new StreamClosedError(this.#gone ? 'client disconnected' : 'stream ended');
  }

  #onDrain = (): void => {
    const drain = this.#drain;
    this.#drain = undefined;
    drain?.resolve();
  };

  #onHeartbeat = (): void => {
    if (this.closed) return;
    // A full buffer means data is still in flight; a ping would only add to it.
    if (!this.#res.writableNeedDrain) this.#res.write(this.#heartbeat);
    this.#timer?.refresh();
  };

  // 'close' before end() means the client went away (after end() it is the normal finish).
  #onClose = (): void => {
    if (this.#ended || this.#gone) return;
    this.#gone = true;
    const err = new StreamClosedError('client disconnected');
    this.#teardown(err);
    this.#drain?.reject(err);
    this.#drain = undefined;
  };

  #teardown(reason: StreamClosedError): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#res.off('close', this.#onClose);
    this.#res.off('drain', this.#onDrain);
    // Keep-alive sockets outlive this response; do not leak listeners onto the next request.
    this.#socket?.off('close', this.#onClose);
    this.#abort.abort(reason);
  }
}

class Ndjson extends ResponseStream implements NdjsonWriter {
  write(value: unknown): Promise<void> {
    let line: string;
    try {
      line = ndjsonLine(value);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new TypeError(String(err)));
    }
    return this.writeChunk(line);
  }
}

class Sse extends ResponseStream implements SseWriter {
  send(event: SseEvent): Promise<void> {
    let frame = '';
    try {
      if (event.event !== undefined) frame += `event: ${singleLine('event', event.event)}\n`;
      if (event.id !== undefined) {
        // The spec makes clients ignore ids containing NUL, so reject them here instead.
        if (event.id.includes('\0')) throw new TypeError('sse: id must not contain NUL');
        frame += `id: ${singleLine('id', event.id)}\n`;
      }
      if (event.retry !== undefined) {
        if (!Number.isInteger(event.retry) || event.retry < 0) {
          throw new TypeError(`sse: retry must be a non-negative integer, got ${event.retry}`);
        }
        frame += `retry: ${event.retry}\n`;
      }
      const data = typeof event.data === 'string' ? event.data : JSON.stringify(event.data);
      if (typeof data !== 'string') throw new TypeError(`sse: cannot serialise ${typeof event.data}`);
      for (const line of data.split(LINE_BREAK)) frame += `data: ${line}\n`;
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new TypeError(String(err)));
    }
    return this.writeChunk(`${frame}\n`);
  }

  comment(text: string): Promise<void> {
    let frame = '';
    for (const line of text.split(LINE_BREAK)) frame += `: ${line}\n`;
    return this.writeChunk(`${frame}\n`);
  }
}

// A line break inside a field would end it early and inject whatever follows as another field.
function singleLine(field: string, value: string): string {
  if (LINE_BREAK.test(value)) throw new TypeError(`sse: ${field} must not contain line breaks`);
  return value;
}

const COMMON_HEADERS = {
  'Cache-Control': 'no-cache',
  // Stops nginx from buffering the stream.
  'X-Accel-Buffering': 'no',
};

/**
 * Starts an NDJSON response (`application/x-ndjson`). With `heartbeatMs`, an empty line is written
 * after that much idle time (NDJSON readers skip blank lines) to keep proxies from timing out.
 */
export function openNdjson(res: ServerResponse, opts: StreamOptions = {}): NdjsonWriter {
  return new Ndjson(
    res,
    { 'Content-Type': 'application/x-ndjson; charset=utf-8', ...COMMON_HEADERS },
    opts,
    '\n',
    opts.heartbeatMs ?? 0,
  );
}

/**
 * Starts a Server-Sent Events response (`text/event-stream`) with a `: ping` comment after
 * `heartbeatMs` idle milliseconds (default 15000, 0 disables). `Connection` is left to Node:
 * keep-alive is the HTTP/1.1 default and hop-by-hop headers are invalid over HTTP/2.
 */
export function openSse(res: ServerResponse, opts: StreamOptions = {}): SseWriter {
  return new Sse(
    res,
    { 'Content-Type': 'text/event-stream; charset=utf-8', ...COMMON_HEADERS },
    opts,
    ': ping\n\n',
    opts.heartbeatMs ?? 15_000,
  );
}

/**
 * Aborts when the client goes away before the exchange is complete: the request is aborted, or
 * the response closes before it finished (a disconnect shows as the response's `close` event).
 * Uploads pass the signal to the blob store so a stalled or cut body stops and stores nothing.
 */
export function disconnectSignal(
  request: IncomingMessage,
  response: ServerResponse,
  reason: () => Error,
): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const abort = () => {
    if (!controller.signal.aborted) controller.abort(reason());
  };
  const onClose = () => {
    if (!response.writableFinished) abort();
  };
  request.once('aborted', abort);
  response.once('close', onClose);
  return {
    signal: controller.signal,
    dispose() {
      request.off('aborted', abort);
      response.off('close', onClose);
    },
  };
}

/**
 * One NDJSON line: `value` as JSON text and a line feed. Throws a TypeError for values JSON cannot
 * represent (`undefined`, functions, symbols) and whatever JSON.stringify throws (BigInt, cycles).
 */
export function ndjsonLine(value: unknown): string {
  const line = JSON.stringify(value);
  // JSON.stringify returns undefined (not a string) for undefined, functions and symbols.
  if (typeof line !== 'string') throw new TypeError(`ndjson: cannot serialise ${typeof value}`);
  return `${line}\n`;
}

/**
 * Writes pre-serialised NDJSON lines (or text) to a response whose head the caller wrote: one
 * `write()`, then, when the response buffer is full, a wait for 'drain' (back-pressure) that ends
 * at once when `signal` aborts (the client left). Whole lines only: a chunk is written as given.
 */
export async function writeLines(res: ServerResponse, chunk: string | Uint8Array, signal: AbortSignal): Promise<void> {
  if (!res.write(chunk)) await drained(res, signal);
}

/** Resolves once `res` can take more writes ('drain'), or at once when `signal` aborts. */
function drained(res: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      res.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    res.once('drain', done);
    signal.addEventListener('abort', done, { once: true });
  });
}
