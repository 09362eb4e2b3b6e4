import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Pool, type Dispatcher } from 'undici';
import { envelope } from '../core/errors.ts';
import { hopByHopHeaderNames, type HeaderMap } from './headers.ts';
import { LeanPool, requestHead } from './lean-client.ts';

/**
 * Remote upstreams (README: Remote upstream URL, Upstream timeouts): the request is streamed to
 * another Stratus process over a keep-alive pool and the answer streamed back, with back-pressure
 * both ways and nothing buffered.
 */

export interface UpstreamProxyOptions {
  /** Time to wait for the upstream's response headers before answering 504 (default 30 s; 0 = none). Streaming bodies have no time limit. */
  headersTimeoutMs?: number;
  /** Time to establish a connection before answering 502 (default 5 s). */
  connectTimeoutMs?: number;
  /** Keep-alive pool size (default 128). */
  connections?: number;
}

export interface ForwardInfo {
  /** Final response headers arrived: time since `forward` was called, for the access log. */
  onUpstreamHeaders?: (elapsedMs: number, status: number) => void;
  /** The exchange failed on the upstream side (the cause behind a 502/504 or a truncated stream). */
  onUpstreamError?: (error: Error) => void;
}

export interface UpstreamProxy {
  /** Forwards req to the upstream and streams the answer back. Resolves when the exchange ends (either way); never rejects. `onUpstreamHeaders` reports the time to first byte for the access log. */
  forward(req: IncomingMessage, res: ServerResponse, info?: ForwardInfo): Promise<void>;
  close(): Promise<void>;
}

/** Removes the hop-by-hop headers from `headers` in place (lower-case keys) and returns it. */
export function stripHopByHop<T extends HeaderMap>(headers: T): T {
  for (const name of hopByHopHeaderNames(headers)) delete headers[name];
  return headers;
}

/**
 * The headers to send upstream. `req.headers` itself when there is nothing to remove (the usual
 * case: the gateway has stripped them already), else a filtered copy: `req` stays as received.
 * `Expect` goes too: the front server has already answered `100 Continue`, and undici refuses it.
 */
function upstreamHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const drop = hopByHopHeaderNames(headers);
  if (drop.length === 0 && headers.expect === undefined) return headers;
  const out: IncomingHttpHeaders = {};
  for (const key of Object.keys(headers)) {
    if (key !== 'expect' && !drop.includes(key)) out[key] = headers[key];
  }
  return out;
}

/**
 * Whether the request has a body: the request stream, null for none, undefined when it cannot be
 * told yet. Framing headers decide when present; the gateway may have removed `Transfer-Encoding`
 * though, and then only the parser knows — it marks a bodiless request complete as soon as it
 * has finished the current packet, which is after the synchronous request handler returns.
 * (undici would also cope with an empty stream, but null spares a GET the stream machinery.)
 */
function requestBody(req: IncomingMessage): IncomingMessage | null | undefined {
  const length = req.headers['content-length'];
  if (length !== undefined) return length === '0' ? null : req;
  if (req.headers['transfer-encoding'] !== undefined) return req;
  if (req.complete) return req.readableLength > 0 ? req : null;
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Error answers

interface Failure {
  readonly status: number;
  readonly headers: OutgoingHttpHeaders;
  readonly body: Buffer;
}

function failure(status: number, code: string, message: string): Failure {
  const body = Buffer.from(JSON.stringify(envelope(status, code, message)));
  return {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length },
    body,
  };
}

// Built once: an error answer costs no serialisation. Reasons stay short (no addresses, no stacks).
const UNREACHABLE = failure(502, 'bad_gateway', 'upstream unreachable');
const CONNECT_TIMEOUT = failure(502, 'bad_gateway', 'upstream connection timed out');
const UPSTREAM_FAILED = failure(502, 'bad_gateway', 'upstream connection failed before the response');
const HEADERS_TIMEOUT = failure(504, 'gateway_timeout', 'upstream did not answer in time');

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
]);

function failureFor(error: Error): Failure {
  const code = (error as { code?: unknown }).code;
  if (code === 'UND_ERR_HEADERS_TIMEOUT') return HEADERS_TIMEOUT;
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return CONNECT_TIMEOUT;
  if (typeof code === 'string' && UNREACHABLE_CODES.has(code)) return UNREACHABLE;
  return UPSTREAM_FAILED;
}

// ---------------------------------------------------------------------------------------------
// One exchange: an undici dispatch handler that writes straight into the ServerResponse

/**
 * `dispatch` with our own handler rather than `request()`/`stream()`: no intermediate Readable, no
 * AbortController, no `finished()` listeners; chunks go from undici's parser to `res.write`, and
 * `pause()`/`resume()` carry the client's back-pressure to the upstream socket.
 */
/** Bodies up to this size are joined to the response head in one write (onResponseEnd). */
const SMALL_BODY = 4 * 1024;

class Exchange implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  /** Final response headers written to `res`. */
  private started = false;
  /** A body chunk has arrived (written, or held in `last`): the headers need no flush of their own. */
  private flowing = false;
  /** The upstream's Content-Length, or -1 when it has none (chunked, close-delimited). */
  private expected = -1;
  /** The whole body when it came in one chunk, held for `end` (see onResponseData). */
  private last: Buffer | null = null;
  /** The upstream side is over: completed or failed. */
  private done = false;
  private clientGone = false;
  private drainHooked = false;
  private readonly startedAt = performance.now();
  /** undici nulls `req.socket` when it destroys a consumed body; put back for the caller's log. */
  private readonly socket: Socket;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly info: ForwardInfo | undefined,
  ) {
    this.socket = req.socket;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // The client left while the request waited for a pooled connection.
    if (this.clientGone) controller.abort(new Error('client disconnected'));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // 1xx: informational, the final answer follows.
    if (statusCode < 200 || this.clientGone) return;
    this.restoreSocket();
    // Freshly parsed by undici for this response: ours to edit.
    stripHopByHop(headers);
    const length = headers['content-length'];
    this.expected = typeof length === 'string' ? Number(length) : -1;
    this.res.writeHead(statusCode, headers as OutgoingHttpHeaders);
    this.started = true;
    this.info?.onUpstreamHeaders?.(performance.now() - this.startedAt, statusCode);
    // Node holds the headers back until the first body write, so that both leave in one packet.
    // A response whose body follows later (SSE, NDJSON, long poll) must show its headers now; a
    // microtask runs after undici has parsed the whole packet, so only those pay a second write.
    queueMicrotask(() => {
      if (!this.flowing && !this.res.writableEnded && !this.clientGone) this.res.flushHeaders();
    });
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.clientGone) return;
    // The whole body in its first chunk (a small answer: the usual case) is held for `end`, which
    // writes head and body at once; `write` would cork the socket, schedule its uncork and make a
    // second pass through the response for `end`. Nothing can follow a complete body.
    if (!this.flowing && chunk.length === this.expected) {
      this.flowing = true;
      this.last = chunk;
      return;
    }
    this.flowing = true;
    if (!this.res.write(chunk)) {
      controller.pause();
      if (!this.drainHooked) {
        this.drainHooked = true;
        this.res.on('drain', () => this.controller?.resume());
      }
    }
  }

  onResponseEnd(): void {
    this.done = true;
    this.restoreSocket();
    // Trailers are dropped: HTTP/1.1 clients rarely ask for them (`TE: trailers`).
    if (this.clientGone) return;
    const last = this.last;
    if (last === null) this.res.end();
    // A small body goes as latin1 text (byte for byte), which Node appends to the head: one
    // buffer, one write() instead of a writev() of head and body.
    else if (last.length <= SMALL_BODY) this.res.end(last.toString('latin1'), 'latin1');
    else this.res.end(last);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    this.done = true;
    this.restoreSocket();
    if (this.clientGone) return;
    this.info?.onUpstreamError?.(error);
    const res = this.res;
    if (this.started) {
      // Too late for a status: cut the connection so that the client sees a truncated body
      // (missing final chunk or short Content-Length) rather than a complete-looking one.
      res.destroy();
      return;
    }
    if (res.destroyed || res.writableEnded) return;
    const answer = failureFor(error);
    res.writeHead(answer.status, answer.headers);
    res.end(answer.body);
  }

  /** `res` closed: finished normally or the client went away. */
  onClientClose(): void {
    this.restoreSocket();
    if (this.done) return;
    this.clientGone = true;
    // Aborting destroys the upstream socket, so the upstream sees its client go away.
    this.controller?.abort(new Error('client disconnected'));
  }

  private restoreSocket(): void {
    if (this.req.socket === null) this.req.socket = this.socket;
  }
}

// ---------------------------------------------------------------------------------------------

const CLOSE_GRACE_MS = 2_000;

/** Proxy to one remote upstream, given by its origin (`http://host:port`; no path). */
export function createUpstreamProxy(baseUrl: string, options: UpstreamProxyOptions = {}): UpstreamProxy {
  const url = new URL(baseUrl);
  if (
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    url.pathname !== '/' ||
    url.search !== '' ||
    url.hash !== '' ||
    url.username !== '' ||
    url.password !== ''
  ) {
    throw new Error(`upstream URL must be an http(s) origin such as http://127.0.0.1:9000, got ${baseUrl}`);
  }
  const pool = new Pool(url.origin, {
    connections: options.connections ?? 128,
    connectTimeout: options.connectTimeoutMs ?? 5_000,
    headersTimeout: options.headersTimeoutMs ?? 30_000,
    // Streams (follow, SSE, downloads) may be quiet for any length of time.
    bodyTimeout: 0,
  });
  // undici derives TLS SNI from the Host header, which here is the client's (docdb.localhost…)
  // and would also reconnect whenever it changes: pin it to the upstream's own name.
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  // Over plain HTTP the name is never sent; pinning it still spares undici deriving it from each
  // request's Host (an IP-address regex per request).
  const servername = url.protocol === 'http:' || isIP(hostname) === 0 ? hostname : undefined;

  const dispatch = (exchange: Exchange, req: IncomingMessage, body: IncomingMessage | null): void => {
    const opts: Dispatcher.DispatchOptions & { servername?: string } = {
      path: req.url ?? '/',
      method: req.method ?? 'GET',
      headers: upstreamHeaders(req.headers),
      body,
    };
    if (servername !== undefined) opts.servername = servername;
    // Errors, synchronous ones included (closed pool, invalid header), reach onResponseError.
    pool.dispatch(opts, exchange);
  };

  // Bodiless requests to a plain-HTTP upstream (most of them) take the lean client (lean-client.ts).
  const lean =
    url.protocol === 'http:'
      ? new LeanPool({
          host: hostname,
          port: Number(url.port || 80),
          connections: options.connections ?? 128,
          connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
          headersTimeoutMs: options.headersTimeoutMs ?? 30_000,
        })
      : null;

  const forwardLean = (req: IncomingMessage, res: ServerResponse, info: ForwardInfo | undefined): boolean => {
    const head = requestHead(req.method ?? 'GET', req.url ?? '/', upstreamHeaders(req.headers), url.host);
    if (head === null) return false;
    const abort = lean!.request(req.method ?? 'GET', head, res, {
      onHeaders: (elapsedMs, status) => info?.onUpstreamHeaders?.(elapsedMs, status),
      onFailure: (error) => {
        info?.onUpstreamError?.(error);
        if (res.destroyed || res.writableEnded || res.headersSent) return;
        const answer = failureFor(error);
        res.writeHead(answer.status, answer.headers);
        res.end(answer.body);
      },
      onError: (error) => {
        info?.onUpstreamError?.(error);
        // Too late for a status: a truncated body, as on the undici path.
        res.destroy();
      },
    });
    res.once('close', abort);
    return true;
  };

  let closing: Promise<void> | undefined;
  const closeGracefully = async (): Promise<void> => {
    // A graceful close waits for open streams, which may never end: cut them after a grace period.
    lean?.close();
    let timer: NodeJS.Timeout | undefined;
    const leanSettled = async () => {
      while (lean?.busy) await new Promise((resolve) => setTimeout(resolve, 20));
    };
    const graceful = Promise.all([
      pool.close().then(
        () => true,
        () => true,
      ),
      leanSettled(),
    ]).then(() => true);
    const expired = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), CLOSE_GRACE_MS);
    });
    const closed = await Promise.race([graceful, expired]);
    clearTimeout(timer);
    if (!closed) {
      lean?.destroy();
      await pool.destroy();
    }
  };

  return {
    forward(req, res, info) {
      return new Promise<void>((resolve) => {
        if (res.destroyed) return resolve();
        res.once('close', () => resolve());
        const go = (body: IncomingMessage | null): void => {
          if (body === null && lean !== null && !lean.closed && forwardLean(req, res, info)) return;
          const exchange = new Exchange(req, res, info);
          res.once('close', () => exchange.onClientClose());
          dispatch(exchange, req, body);
        };
        const body = requestBody(req);
        if (body !== undefined) go(body);
        else
          queueMicrotask(() => {
            // The client may have gone meanwhile: 'close' settles the promise.
            if (!res.destroyed) go(req.complete && req.readableLength === 0 ? null : req);
          });
      });
    },

    close() {
      closing ??= closeGracefully();
      return closing;
    },
  };
}
