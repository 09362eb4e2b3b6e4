import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { hopByHopHeaderNames } from './headers.ts';

/**
 * A purpose-built HTTP/1.1 client for the proxy's commonest exchange: a request without a body
 * to a plain-HTTP upstream (README: Remote upstream URL). Measured under wrk, undici's general
 * client cost about twice the CPU per proxied request of a bare keep-alive socket; this keeps to
 * what such an exchange needs: one write of the head, a response parser (Content-Length, chunked
 * and close-delimited bodies, 1xx skipped), keep-alive reuse, back-pressure, the same timeouts
 * and errors as the undici path. Requests with a body, and https upstreams, stay on undici.
 */

/** What the caller does with the outcome: the same answers as the undici path (proxy.ts). */
export interface LeanCallbacks {
  /** Final response headers written: time since the exchange began, and the status. */
  onHeaders(elapsedMs: number, status: number): void;
  /** Failed before the response head was written: the caller answers 502/504 from the error. */
  onFailure(error: Error): void;
  /** Failed after the head: the caller cuts the client connection. */
  onError(error: Error): void;
}

export interface LeanPoolOptions {
  host: string;
  port: number;
  connections: number;
  connectTimeoutMs: number;
  /** 0 = none. */
  headersTimeoutMs: number;
}

/** Idle keep-alive sockets are closed after this long (undici's default), well under the upstream's 65 s. */
const IDLE_MS = 4_000;
/** A response head larger than this is refused (as llhttp's default limit). */
const MAX_HEAD = 80 * 1024;
/** Bodies up to this size are joined to the response head in one write (see finishWhole). */
const SMALL_BODY = 4 * 1024;
/** Characters not allowed in a header value or the request target (as Node and undici check). */
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const INVALID_PATH = /[^\u0021-\u00ff]/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

function codedError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/**
 * The request head, or null when something in it is not safe to write as is (the undici path
 * then handles, and refuses, it exactly as before).
 */
export function requestHead(
  method: string,
  path: string,
  headers: IncomingHttpHeaders,
  defaultHost: string,
): string | null {
  if (!TOKEN.test(method) || path[0] !== '/' || INVALID_PATH.test(path)) return null;
  let head = `${method} ${path} HTTP/1.1\r\n`;
  // HTTP/1.1 requires a Host (an HTTP/1.0 client may have sent none): the upstream's own, as undici sends.
  if (headers.host === undefined) head += `host: ${defaultHost}\r\n`;
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    if (typeof value === 'string') {
      if (INVALID_VALUE.test(value)) return null;
      head += `${name}: ${value}\r\n`;
    } else {
      for (const one of value) {
        if (INVALID_VALUE.test(one)) return null;
        head += `${name}: ${one}\r\n`;
      }
    }
  }
  return head + '\r\n';
}

const enum Body {
  None,
  Length,
  Chunked,
  Close,
}

const enum Chunk {
  Size,
  Data,
  DataEnd,
  Trailers,
}

/** One upstream connection; it serves one exchange at a time (no pipelining). */
class Connection {
  readonly socket: net.Socket;
  exchange: LeanExchange | null = null;
  /** Connected and usable for another request once the current one ends. */
  reusable = true;
  connected = false;
  private idleTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly pool: LeanPool,
    options: LeanPoolOptions,
  ) {
    const socket = net.connect({ host: options.host, port: options.port, noDelay: true });
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => this.onEnd());
    socket.on('error', (error) => this.fail(error));
    socket.on('close', () => this.onClose());
  }

  private onData(chunk: Buffer): void {
    const exchange = this.exchange;
    // Bytes nobody asked for (on an idle connection): the connection cannot be trusted any more.
    if (exchange === null) {
      this.reusable = false;
      this.socket.destroy();
      return;
    }
    exchange.onData(chunk);
  }

  private onEnd(): void {
    this.reusable = false;
    this.exchange?.onUpstreamEnd();
  }

  fail(error: Error): void {
    this.reusable = false;
    const exchange = this.exchange;
    this.exchange = null;
    exchange?.onUpstreamError(error);
    this.socket.destroy();
  }

  private onClose(): void {
    this.reusable = false;
    this.clearIdle();
    const exchange = this.exchange;
    this.exchange = null;
    exchange?.onUpstreamError(codedError('UND_ERR_SOCKET', 'other side closed'));
    this.pool.removed(this);
  }

  startIdle(): void {
    this.idleTimer = setTimeout(() => this.socket.destroy(), IDLE_MS);
    this.idleTimer.unref();
  }

  clearIdle(): void {
    if (this.idleTimer !== null) clearTimeout(this.idleTimer);
    this.idleTimer = null;
  }
}

/** One proxied exchange on the lean path: writes the head, parses the answer into `res`. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

class LeanExchange {
  conn: Connection | null = null;
  private readonly startedAt = performance.now();
  private buffer: Buffer | null = null;
  private headDone = false;
  private body = Body.None;
  /** Content-Length bytes left, or the current chunk's bytes left. */
  private left = 0;
  private chunk = Chunk.Size;
  private keepAlive = true;
  private done = false;
  private wroteBody = false;
  private headersTimer: NodeJS.Timeout | null = null;
  /** On a kept-alive connection (which the upstream may have closed just as it was reused). */
  private reused = false;
  private retried = false;
  private received = false;
  private connectTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly pool: LeanPool,
    private readonly head: string,
    private readonly isHead: boolean,
    private readonly res: ServerResponse,
    private readonly callbacks: LeanCallbacks,
    /** An idempotent method (RFC 9110 §9.2.2): safe to send again if the upstream may have seen it. */
    private readonly idempotent: boolean,
  ) {}

  /** Called with a connection: write the request now or once connected. */
  start(conn: Connection, fresh: boolean): void {
    this.reused = !fresh;
    this.conn = conn;
    conn.exchange = this;
    if (fresh && !conn.connected) {
      const ms = this.pool.options.connectTimeoutMs;
      if (ms > 0)
        this.connectTimer = setTimeout(() => conn.fail(codedError('UND_ERR_CONNECT_TIMEOUT', 'connect timeout')), ms);
      conn.socket.once('connect', () => {
        conn.connected = true;
        if (this.connectTimer !== null) clearTimeout(this.connectTimer);
        this.connectTimer = null;
        if (!this.done) this.send();
      });
    } else {
      this.send();
    }
  }

  private send(): void {
    const conn = this.conn!;
    conn.socket.write(this.head, 'latin1');
    const ms = this.pool.options.headersTimeoutMs;
    if (ms > 0)
      this.headersTimer = setTimeout(() => {
        this.headersTimer = null;
        conn.fail(codedError('UND_ERR_HEADERS_TIMEOUT', 'headers timeout'));
      }, ms);
  }

  onData(chunk: Buffer): void {
    if (this.done) return;
    this.received = true;
    if (!this.headDone) {
      const buffer = this.buffer === null ? chunk : Buffer.concat([this.buffer, chunk]);
      this.buffer = null;
      this.parseHeads(buffer);
      return;
    }
    this.onBody(chunk);
  }

  /** Parses response heads (skipping 1xx ones) from `buffer`, then hands the rest to the body. */
  private parseHeads(buffer: Buffer): void {
    let offset = 0;
    for (;;) {
      const end = buffer.indexOf('\r\n\r\n', offset, 'latin1');
      if (end < 0) {
        if (buffer.length - offset > MAX_HEAD) return this.protocolError('response head too large');
        this.buffer = offset === 0 ? buffer : buffer.subarray(offset);
        return;
      }
      const text = buffer.toString('latin1', offset, end);
      offset = end + 4;
      const parsed = parseHead(text);
      if (parsed === null) return this.protocolError('invalid response head');
      const { status, headers, http10 } = parsed;
      if (status < 200) {
        // 100 Continue, 103 Early Hints: the final answer follows. 101 needs an upgrade we never ask for.
        if (status === 101 || status < 100) return this.protocolError('unexpected status');
        continue;
      }
      this.startResponse(status, headers, http10);
      if (this.done) return;
      if (offset < buffer.length) this.onBody(buffer.subarray(offset), true);
      else if (this.body === Body.None) this.finish();
      return;
    }
  }

  private startResponse(status: number, headers: IncomingHttpHeaders, http10: boolean): void {
    if (this.headersTimer !== null) clearTimeout(this.headersTimer);
    this.headersTimer = null;
    const connection = headers.connection ?? '';
    this.keepAlive = http10 ? /\bkeep-alive\b/i.test(connection) : !/\bclose\b/i.test(connection);
    const te = headers['transfer-encoding'];
    const cl = headers['content-length'];
    if (this.isHead || status === 204 || status === 304) this.body = Body.None;
    else if (te !== undefined) {
      // Chunked must be the last coding; anything else is delimited by the close (RFC 9112, 6.3).
      this.body = /(?:^|,)\s*chunked\s*$/i.test(te) ? Body.Chunked : Body.Close;
      if (cl !== undefined) return this.protocolError('both Transfer-Encoding and Content-Length');
    } else if (cl !== undefined) {
      if (!/^\d+$/.test(cl)) return this.protocolError('invalid Content-Length');
      this.left = Number(cl);
      this.body = this.left === 0 ? Body.None : Body.Length;
    } else this.body = Body.Close;
    if (this.body === Body.Close) this.keepAlive = false;
    // Freshly parsed for this response: ours to edit.
    for (const name of hopByHopHeaderNames(headers)) delete headers[name];
    try {
      this.res.writeHead(status, headers as OutgoingHttpHeaders);
    } catch {
      // Node refused the head (it validates what parseHead may have let through): a bad answer.
      return this.protocolError('response head not writable');
    }
    this.headDone = true;
    this.callbacks.onHeaders(performance.now() - this.startedAt, status);
    // Node holds the head back until the first body write so that both leave in one packet; a
    // body that comes later (SSE, NDJSON) must not hold it: flushed once this packet is parsed.
    if (this.body !== Body.None)
      queueMicrotask(() => {
        if (!this.wroteBody && !this.done && !this.res.writableEnded && !this.res.destroyed) this.res.flushHeaders();
      });
  }

  /** `first`: the bytes that arrived with the head (a whole small body is sent in one write). */
  private onBody(chunk: Buffer, first = false): void {
    if (this.body === Body.Length) {
      if (chunk.length > this.left) {
        // Bytes past the answer: the connection is out of step, never reused.
        this.keepAlive = false;
        chunk = chunk.subarray(0, this.left);
      }
      this.left -= chunk.length;
      if (this.left === 0 && first) return this.finishWhole(chunk);
      this.write(chunk);
      if (this.left === 0) this.finish();
    } else if (this.body === Body.Close) {
      this.write(chunk);
    } else if (this.body === Body.Chunked) {
      this.onChunked(chunk);
    } else {
      // Bytes after a bodiless answer.
      this.keepAlive = false;
      this.finish();
    }
  }

  private onChunked(input: Buffer): void {
    const data = this.buffer === null ? input : Buffer.concat([this.buffer, input]);
    this.buffer = null;
    let offset = 0;
    while (offset < data.length && !this.done) {
      if (this.chunk === Chunk.Data) {
        const take = Math.min(this.left, data.length - offset);
        this.write(data.subarray(offset, offset + take));
        offset += take;
        this.left -= take;
        if (this.left === 0) this.chunk = Chunk.DataEnd;
        continue;
      }
      const eol = data.indexOf('\r\n', offset, 'latin1');
      if (eol < 0) {
        if (data.length - offset > MAX_HEAD) return this.protocolError('chunk line too long');
        this.buffer = data.subarray(offset);
        return;
      }
      const line = data.toString('latin1', offset, eol);
      offset = eol + 2;
      if (this.chunk === Chunk.DataEnd) {
        if (line !== '') return this.protocolError('invalid chunk end');
        this.chunk = Chunk.Size;
      } else if (this.chunk === Chunk.Size) {
        const size = /^([0-9a-fA-F]{1,12})[ \t]*(?:;.*)?$/.exec(line);
        if (size === null) return this.protocolError('invalid chunk size');
        this.left = parseInt(size[1]!, 16);
        this.chunk = this.left === 0 ? Chunk.Trailers : Chunk.Data;
      } else if (line === '') {
        // Trailers are dropped, as on the undici path.
        if (offset < data.length) this.keepAlive = false;
        this.finish();
        return;
      }
    }
  }

  private write(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.wroteBody = true;
    if (!this.res.write(chunk)) {
      this.conn?.socket.pause();
      this.res.once('drain', () => this.conn?.socket.resume());
    }
  }

  /** The whole body came with the head: head and body leave in one write. */
  private finishWhole(body: Buffer): void {
    this.wroteBody = true;
    this.done = true;
    // As latin1 text (byte for byte) Node appends a small body to the head: one write() call.
    if (body.length <= SMALL_BODY) this.res.end(body.toString('latin1'), 'latin1');
    else this.res.end(body);
    this.release();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.res.end();
    this.release();
  }

  private release(): void {
    const conn = this.conn;
    this.conn = null;
    if (conn === null) return;
    conn.exchange = null;
    // Paused for a slow client whose last bytes are now written: the next exchange reads again.
    if (conn.socket.isPaused()) conn.socket.resume();
    if (this.keepAlive && conn.reusable) this.pool.idle(conn);
    else conn.socket.destroy();
  }

  onUpstreamEnd(): void {
    if (this.done) return;
    if (this.headDone && this.body === Body.Close) return this.finish();
    this.onUpstreamError(codedError('UND_ERR_SOCKET', 'other side closed'));
  }

  onUpstreamError(error: Error): void {
    if (this.headersTimer !== null) clearTimeout(this.headersTimer);
    if (this.connectTimer !== null) clearTimeout(this.connectTimer);
    this.headersTimer = this.connectTimer = null;
    if (this.done) return;
    const conn = this.conn;
    this.conn = null;
    if (conn !== null) {
      conn.exchange = null;
      conn.reusable = false;
      conn.socket.destroy();
    }
    // A kept-alive connection the upstream closed as it was reused (its FIN not yet read): nothing
    // was answered and the request has no body, so an idempotent one is sent once more on a fresh
    // connection. A POST is not: the upstream may have acted on it before it went away.
    if (
      this.idempotent &&
      this.reused &&
      !this.retried &&
      !this.received &&
      conn !== null &&
      isClosedConnection(error)
    ) {
      this.retried = true;
      this.pool.retry(this);
      return;
    }
    this.done = true;
    if (this.headDone) this.callbacks.onError(error);
    else this.callbacks.onFailure(error);
  }

  /** The client went away: the upstream connection goes too, so the upstream sees it. */
  abort(): void {
    if (this.done) return;
    this.done = true;
    if (this.headersTimer !== null) clearTimeout(this.headersTimer);
    if (this.connectTimer !== null) clearTimeout(this.connectTimer);
    const conn = this.conn;
    this.conn = null;
    if (conn !== null) {
      conn.exchange = null;
      conn.reusable = false;
      conn.socket.destroy();
    } else this.pool.dequeue(this);
  }

  private protocolError(message: string): void {
    this.onUpstreamError(codedError('HPE_INVALID', message));
  }
}

function isClosedConnection(error: Error): boolean {
  const code = (error as { code?: unknown }).code;
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE';
}

/** Status line and headers (lower-case names; repeated ones joined, Set-Cookie kept as a list). */
function parseHead(text: string): { status: number; headers: IncomingHttpHeaders; http10: boolean } | null {
  const lines = text.split('\r\n');
  const statusLine = /^HTTP\/1\.([01]) (\d{3})(?: .*)?$/.exec(lines[0]!);
  if (statusLine === null) return null;
  const headers: IncomingHttpHeaders = {};
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    if (colon <= 0) return null;
    const name = line.slice(0, colon).toLowerCase();
    if (!TOKEN.test(name)) return null;
    const value = line.slice(colon + 1).trim();
    if (INVALID_VALUE.test(value)) return null;
    const previous = headers[name];
    if (name === 'set-cookie') (headers['set-cookie'] ??= []).push(value);
    else if (previous === undefined) headers[name] = value;
    else if (name === 'content-length') {
      if (previous !== value) return null;
    } else headers[name] = `${previous as string}, ${value}`;
  }
  return { status: Number(statusLine[2]), headers, http10: statusLine[1] === '0' };
}

/** Keep-alive connections to one upstream: idle ones reused last-in first-out, a queue beyond the limit. */
export class LeanPool {
  private readonly all = new Set<Connection>();
  private readonly free: Connection[] = [];
  private readonly waiting: LeanExchange[] = [];
  private open = 0;
  closed = false;

  constructor(readonly options: LeanPoolOptions) {}

  /** Starts an exchange; returns its abort (for when the client goes away). */
  request(method: string, head: string, res: ServerResponse, callbacks: LeanCallbacks): () => void {
    const exchange = new LeanExchange(this, head, method === 'HEAD', res, callbacks, IDEMPOTENT.has(method));
    const conn = this.free.pop();
    if (conn !== undefined) {
      conn.clearIdle();
      exchange.start(conn, false);
    } else if (this.open < this.options.connections) {
      exchange.start(this.connect(), true);
    } else this.waiting.push(exchange);
    return () => exchange.abort();
  }

  private connect(): Connection {
    this.open++;
    const conn = new Connection(this, this.options);
    this.all.add(conn);
    return conn;
  }

  idle(conn: Connection): void {
    const next = this.waiting.shift();
    if (next !== undefined) return next.start(conn, false);
    if (this.closed) {
      conn.socket.destroy();
      return;
    }
    conn.startIdle();
    this.free.push(conn);
  }

  removed(conn: Connection): void {
    if (!this.all.delete(conn)) return;
    this.open--;
    const at = this.free.indexOf(conn);
    if (at >= 0) this.free.splice(at, 1);
    // A queued exchange takes the freed slot.
    const next = this.waiting.shift();
    if (next !== undefined) next.start(this.connect(), true);
  }

  /** Starts `exchange` again on a fresh connection (or first in the queue when at the limit). */
  retry(exchange: LeanExchange): void {
    if (this.open < this.options.connections) exchange.start(this.connect(), true);
    else this.waiting.unshift(exchange);
  }

  dequeue(exchange: LeanExchange): void {
    const at = this.waiting.indexOf(exchange);
    if (at >= 0) this.waiting.splice(at, 1);
  }

  /** Closes idle connections now; busy ones close when their exchange ends. */
  close(): void {
    this.closed = true;
    for (const conn of this.free.splice(0)) conn.socket.destroy();
  }

  /** Whether any exchange is still running or queued. */
  get busy(): boolean {
    return this.open > this.free.length || this.waiting.length > 0;
  }

  /** Cuts every connection left: their exchanges fail as an upstream failure would. */
  destroy(): void {
    this.closed = true;
    const error = codedError('UND_ERR_DESTROYED', 'the proxy was closed');
    for (const exchange of this.waiting.splice(0)) exchange.onUpstreamError(error);
    for (const conn of this.all) conn.fail(error);
  }
}
