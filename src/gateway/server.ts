import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { attachDrainNotice, DrainNotice } from '../core/drain.ts';
import type { TrustedProxies } from './client-address.ts';
import { envelope } from '../core/errors.ts';
import { Exchange, type GatewayContext, type GatewayOptions } from './exchange.ts';
import { INTERNAL_STEPS, PUBLIC_STEPS, runSteps } from './pipeline.ts';
import { answerReadinessRequest, type Readiness } from './readiness.ts';
import { finish } from './steps/finish.ts';
import { metricsTokenCheck } from './steps/metrics.ts';

export type { GatewayOptions } from './exchange.ts';

const LOG_LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };

/**
 * The request handler shared by both listeners. `trusted` is the internal port: no
 * authentication step, identity headers pass as sent. On the public port client-sent identity
 * headers are stripped first, whatever the route, and the gateway's own are injected. Each
 * request is one `Exchange` run through the port's steps (pipeline.ts); the stats and the access
 * log are written when its response closes.
 */
export function createGatewayHandler(options: GatewayOptions, trusted: boolean) {
  const { logger } = options;
  const port = trusted ? 'internal' : 'public';
  const ctx: GatewayContext = {
    ...options,
    trusted,
    port,
    metricsAllowed: trusted
      ? true
      : options.metricsToken !== undefined
        ? metricsTokenCheck(options.metricsToken)
        : null,
    accessLog: logger.child({ component: 'access' }),
    logAccess:
      options.writeAccessLog !== false &&
      LOG_LEVELS[logger.level] !== undefined &&
      LOG_LEVELS[logger.level]! <= LOG_LEVELS.info!,
  };
  const steps = trusted ? INTERNAL_STEPS : PUBLIC_STEPS;
  const metrics = options.metrics;
  return (req: IncomingMessage, res: ServerResponse): void => {
    const exchange = new Exchange(ctx, req, res);
    metrics?.requestStarted(port);
    res.once('close', () => finish(exchange));
    runSteps(steps, exchange);
  };
}

export interface Listener {
  readonly server: http.Server;
  readonly port: number;
  /**
   * Starts the drain (README: Shutdown and readiness): the port stops accepting connections, idle keep-alive
   * connections close, every response from now on (and every in-flight one not yet answered) says
   * `Connection: close`, and long-lived responses are told to end (`core/drain.ts`). Idempotent.
   */
  drain(): void;
  /** Resolves once no request is in flight on this port (checked again after each one ends). */
  settled(): Promise<void>;
  /** Cuts every connection left and stops. Resolves with the number of requests that were cut. */
  cut(): Promise<number>;
  /** `drain()`, then up to `graceMs` for `settled()`, then `cut()`. */
  close(graceMs?: number): Promise<number>;
}

const IDLE_TIMEOUT_MS = 5 * 60_000;
/** The grace `close()` gives in-flight requests when the caller names none. */
const DEFAULT_GRACE_MS = 2_000;

export interface ListenOptions {
  /**
   * A request body that sends no byte for this long (while the server is ready to read) is cut:
   * 408 when nothing was answered yet, then the connection closes. 0 = never. A long upload whose
   * bytes keep arriving is never cut, and neither is one the server itself is slow to read.
   */
  bodyIdleTimeoutMs?: number;
  /** Open connections one client address may hold; a connection beyond it is closed at once. */
  maxConnectionsPerAddress?: number;
  /** Proxies exempt from `maxConnectionsPerAddress`: they hold the connections of all their clients. */
  trustedProxies?: TrustedProxies;
  /** Answers `GET /readyz` before the handler (readiness.ts `isCheck`: not on service or project hosts). */
  readiness?: Readiness;
}

/**
 * Starts a listener. No request timeout (long uploads and streams), idle timeouts instead;
 * `close()` drains: in-flight requests get a bounded grace, then what is left is cut.
 */
export async function listen(
  handler: http.RequestListener,
  port: number,
  host: string,
  options: ListenOptions = {},
): Promise<Listener> {
  const bodyIdleMs = options.bodyIdleTimeoutMs ?? 0;
  const readiness = options.readiness;
  const notice = new DrainNotice();
  const inFlight = new Set<ServerResponse>();
  let settle: (() => void) | undefined;
  const server = http.createServer({ requestTimeout: 0, headersTimeout: 60_000, keepAliveTimeout: 65_000 });
  const done = (res: ServerResponse) => {
    inFlight.delete(res);
    if (!notice.draining) return;
    // The connection may now be idle: close it rather than keep it alive for nothing.
    setImmediate(() => server.closeIdleConnections());
    if (inFlight.size === 0) settle?.();
  };
  // One listener function for every response ('close' is emitted once): no closure or `once`
  // wrapper per request on the hot path.
  function responseClosed(this: ServerResponse): void {
    done(this);
  }
  const guarded: http.RequestListener = (req, res) => {
    inFlight.add(res);
    res.on('close', responseClosed);
    attachDrainNotice(req, notice);
    if (notice.draining) res.setHeader('connection', 'close');
    if (readiness?.isCheck(req)) return answerReadinessRequest(readiness, req, res);
    if (bodyIdleMs > 0) watchBody(req, res, bodyIdleMs);
    handler(req, res);
  };
  server.on('request', guarded);
  // A connection with no traffic either way for this long is closed; streams send heartbeats.
  server.timeout = IDLE_TIMEOUT_MS;
  if (options.maxConnectionsPerAddress !== undefined)
    limitConnections(server, options.maxConnectionsPerAddress, options.trustedProxies);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  let closed: Promise<void> | undefined;
  const drain = () => {
    if (notice.draining) return;
    // Stops accepting at once; Node also closes the idle keep-alive connections here.
    closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const res of inFlight) if (!res.headersSent) res.setHeader('connection', 'close');
    notice.start();
  };
  const settled = new Promise<void>((resolve) => (settle = resolve));
  let cutting: Promise<number> | undefined;
  const cut = () =>
    (cutting ??= (async () => {
      drain();
      const count = inFlight.size;
      server.closeAllConnections();
      await closed;
      return count;
    })());
  return {
    server,
    port: (server.address() as AddressInfo).port,
    drain,
    settled: () => {
      if (inFlight.size === 0) settle?.();
      return settled;
    },
    cut,
    close: async (graceMs = DEFAULT_GRACE_MS) => {
      drain();
      let timer: NodeJS.Timeout | undefined;
      // Not unref'd: the grace is what the process waits for.
      const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
      await Promise.race([settled, grace, ...(inFlight.size === 0 ? [Promise.resolve()] : [])]);
      clearTimeout(timer);
      return cut();
    },
  };
}

/** Closes a new connection at once when its address already holds `max` open ones. */
function limitConnections(server: http.Server, max: number, proxies?: TrustedProxies): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    if (proxies?.trusts(address)) return;
    const count = (open.get(address) ?? 0) + 1;
    if (count > max) {
      socket.destroy();
      return;
    }
    open.set(address, count);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left <= 0) open.delete(address);
      else open.set(address, left);
    });
  });
}

/**
 * Cuts a request whose body stalls (slowloris): every `idleMs` the socket must have read more
 * bytes, unless the body is complete or the server is the one not reading (data waiting in the
 * request's buffer, or the request paused by a consumer applying back-pressure).
 */
function watchBody(req: IncomingMessage, res: ServerResponse, idleMs: number): void {
  const length = req.headers['content-length'];
  if ((length === undefined || length === '0') && req.headers['transfer-encoding'] === undefined) return;
  const socket = req.socket;
  let lastRead = socket.bytesRead;
  const timer = setInterval(() => {
    if (req.complete || req.destroyed || socket.destroyed) return clearInterval(timer);
    const read = socket.bytesRead;
    if (read !== lastRead || req.readableLength > 0 || req.isPaused() || socket.isPaused()) {
      lastRead = read;
      return;
    }
    clearInterval(timer);
    if (!res.headersSent) {
      const body = JSON.stringify(
        envelope(408, 'request_timeout', `no part of the request body arrived for ${idleMs / 1000} s`),
      );
      res.writeHead(408, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
        connection: 'close',
      });
      res.end(body, () => socket.destroy());
      setTimeout(() => socket.destroy(), 1_000).unref();
    } else {
      socket.destroy();
    }
  }, idleMs);
  timer.unref();
  res.once('close', () => clearInterval(timer));
}
