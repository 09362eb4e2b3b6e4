import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { ServiceName } from '../config.ts';
import type { ServiceApp } from '../core/app.ts';
import { envelope } from '../core/errors.ts';
import { IDENTITY_HEADER, PROJECT_HEADER } from '../core/identity.ts';
import { SESSION_COOKIE } from '../services/auth/index.ts';
import { Authenticator, INVALID_KEY_MESSAGE, type AuthOutcome, type Credential } from './authenticate.ts';
import { addHeaderAtWriteHead, hopByHopHeaderNames, removeRequestHeaders, setRequestHeader, setRequestHeaders } from './headers.ts';
import { applyCors } from './origins.ts';
import { underPrefix, type RoutePolicy } from './policy.ts';
import type { ProjectRef } from './projects.ts';
import type { UpstreamProxy } from './proxy.ts';
import { hostName, resolveRoute } from './routing.ts';
import type { GatewayStats } from './stats.ts';

export interface GatewayOptions {
  domain: string;
  /** Service apps running in this process, already `ready()`. */
  services: ReadonlyMap<ServiceName, ServiceApp>;
  /** Services running in other processes. */
  upstreams: ReadonlyMap<ServiceName, UpstreamProxy>;
  gateway: ServiceApp;
  projects: { bySlug(slug: string): Promise<ProjectRef | null> };
  policy: (hostLabel: string, path: string) => RoutePolicy;
  /** Public port only: the authentication step. */
  authenticator: Authenticator | null;
  stats: GatewayStats;
  logger: FastifyBaseLogger;
}

/** Client-sent identity headers that never pass the public port (decisions §2). */
const FORGEABLE_HEADERS = [IDENTITY_HEADER, PROJECT_HEADER];
const CREDENTIAL_HEADERS: Record<Credential, readonly string[]> = {
  api_key: ['api-key', 'api-secret'],
  basic: ['authorization'],
  bearer_session: ['authorization'],
  bearer_jwt: ['authorization'],
  cookie: [],
};

function sendError(res: ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(envelope(status, code, message));
  res.writeHead(status, { ...headers, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/**
 * The key-value namespace of a public-port caller (decision 46, kv README): the one project its API
 * key is bound to, else the caller's own user namespace (the user id; project ids and user ids
 * never collide: `project-…` and `user-…`). The node keeps namespaces apart as projects.
 */
function kvNamespace(outcome: Extract<AuthOutcome, { kind: 'authenticated' }>): string {
  return outcome.keyProject ?? outcome.identity.user.id;
}

/** Headers only the gateway sets; a client naming one in `Connection` is refused (400). */
const INJECTED_HEADERS = new Set([IDENTITY_HEADER, PROJECT_HEADER]);

/**
 * Removes hop-by-hop headers and any header the client named in `Connection`, before the gateway
 * injects anything (so a client cannot have an injected header dropped by naming it). Returns
 * false when `Connection` names a header the gateway injects. Transfer-Encoding stays: Node has
 * already decoded the body, and Fastify reads the header to know one is coming.
 */
function removeHopByHop(req: IncomingMessage): boolean {
  const names = hopByHopHeaderNames(req.headers);
  if (names.length === 0) return true;
  const connection = req.headers.connection;
  if (connection !== undefined && connection.split(',').some((token) => INJECTED_HEADERS.has(token.trim().toLowerCase()))) return false;
  removeRequestHeaders(req, names.filter((name) => name !== 'transfer-encoding'));
  return true;
}

/** Drops `stratus_session` from the Cookie header so no backend (or lambda) sees a session token. */
function removeSessionCookie(req: IncomingMessage): void {
  const cookie = req.headers.cookie;
  if (!cookie || !cookie.includes(SESSION_COOKIE)) return;
  const kept = cookie
    .split(';')
    .map((part) => part.trim())
    .filter((part) => part !== '' && !part.startsWith(`${SESSION_COOKIE}=`));
  if (kept.length > 0) setRequestHeader(req, 'cookie', kept.join('; '));
  else removeRequestHeaders(req, ['cookie']);
}

const ANONYMOUS: AuthOutcome = { kind: 'anonymous' };
const LOG_LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };

interface Exchange {
  /** performance.now() at arrival (ms, fractional). */
  start: number;
  host: string | null;
  upstream: string;
  upstreamMs?: number;
  outcome?: AuthOutcome;
  project?: ProjectRef | null;
}

/**
 * The request handler shared by both listeners. `trusted` is the internal port: no
 * authentication step, identity headers pass as sent. On the public port client-sent identity
 * headers are stripped first, whatever the route, and the gateway's own are injected.
 */
export function createGatewayHandler(options: GatewayOptions, trusted: boolean) {
  const { domain, services, upstreams, gateway, projects, policy, authenticator, stats, logger } = options;
  const accessLog = logger.child({ component: 'access' });
  const logAccess = LOG_LEVELS[logger.level] !== undefined && LOG_LEVELS[logger.level]! <= LOG_LEVELS.info!;

  const finish = (req: IncomingMessage, res: ServerResponse, exchange: Exchange) => {
    const servingNs = Math.round((performance.now() - exchange.start) * 1e6);
    stats.record(exchange.host, servingNs);
    if (!logAccess) return;
    const identity = exchange.outcome?.kind === 'authenticated' ? exchange.outcome.identity : null;
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    // The query string is left out: it may carry tokens.
    accessLog.info({
      duration_ms: Math.round(servingNs / 1e4) / 100,
      client: req.socket.remoteAddress,
      method: req.method,
      host: exchange.host ?? hostName(req.headers.host),
      path: query >= 0 ? url.slice(0, query) : url,
      status: res.statusCode,
      aborted: !res.writableFinished || undefined,
      auth: identity?.auth?.method ?? (trusted ? 'internal' : 'anonymous'),
      user: identity?.user.id,
      project: exchange.project?.id,
      upstream: exchange.upstream,
      upstream_ms: exchange.upstreamMs,
      request_id: req.headers['x-request-id'],
      user_agent: req.headers['user-agent'],
    });
  };

  const dispatch = (service: ServiceName | 'gateway', req: IncomingMessage, res: ServerResponse, exchange: Exchange) => {
    if (service === 'gateway') {
      exchange.upstream = 'gateway';
      return gateway.routing(req, res);
    }
    const app = services.get(service);
    if (app) {
      exchange.upstream = `inproc:${service}`;
      return app.routing(req, res);
    }
    const proxy = upstreams.get(service);
    if (proxy) {
      exchange.upstream = service;
      void proxy.forward(req, res, {
        onUpstreamHeaders: (elapsedMs) => {
          exchange.upstreamMs = elapsedMs;
        },
      });
      return;
    }
    exchange.upstream = 'none';
    sendError(res, 503, 'service_unavailable', `the ${service} service is not running on this instance`);
  };

  /** The identity step's result applied: 401s, then header rewriting and dispatch. */
  const forward = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, rule: RoutePolicy, service: ServiceName | 'gateway', project: ProjectRef | null, outcome: AuthOutcome) => {
    exchange.outcome = outcome;
    if (outcome.kind === 'rejected') return sendError(res, 401, 'unauthorized', outcome.message);
    if (outcome.kind === 'limited') {
      return sendError(res, 429, 'too_many_requests', 'too many credential checks from this address or for this key; retry later', { 'retry-after': String(outcome.retryAfterSeconds) });
    }
    if (outcome.kind === 'anonymous' && rule === 'require') {
      // An unknown key is told apart from a wrong secret by neither message nor status.
      return sendError(res, 401, 'unauthorized', req.headers['api-key'] !== undefined ? INVALID_KEY_MESSAGE : 'authentication required');
    }
    if ((outcome.kind === 'anonymous' || outcome.kind === 'authenticated') && outcome.strip) removeRequestHeaders(req, outcome.strip);
    if (outcome.kind === 'authenticated') {
      removeRequestHeaders(req, CREDENTIAL_HEADERS[outcome.credential]);
      setRequestHeader(req, IDENTITY_HEADER, outcome.identityJson ?? JSON.stringify(outcome.identity));
      if (outcome.setCookie) res.appendHeader('set-cookie', outcome.setCookie);
    }
    removeSessionCookie(req);
    if (project) setRequestHeader(req, PROJECT_HEADER, project.id);
    else if (service === 'kv' && outcome.kind === 'authenticated') setRequestHeader(req, PROJECT_HEADER, kvNamespace(outcome));
    const requestId = randomUUID();
    addHeaderAtWriteHead(res, 'x-request-id', requestId);
    setRequestHeaders(req, 'x-request-id', requestId, 'x-forwarded-for', req.socket.remoteAddress ?? '', 'x-forwarded-proto', 'http', 'x-forwarded-host', req.headers.host ?? '');
    dispatch(service, req, res, exchange);
  };

  /** Everything after the route is known: policy, authentication (async only with credentials), dispatch. */
  const kvFeedRefused = (res: ServerResponse) =>
    sendError(res, 403, 'forbidden', 'the replication feed carries every tenant: replicas follow a parent on its internal port');
  const admit = (req: IncomingMessage, res: ServerResponse, exchange: Exchange, label: string, path: string, service: ServiceName | 'gateway', project: ProjectRef | null): void => {
    if (!trusted && req.headers.origin !== undefined && applyCors(req, res, domain)) return;
    const rule = policy(label, path);
    if (trusted) {
      // On the internal port the key-value node checks that credentials are present itself (403
      // `forbidden`; decision 8, contract rule 7): `require` there is the public port's rule.
      if (rule === 'require' && service !== 'kv' && req.headers[IDENTITY_HEADER] === undefined) return sendError(res, 401, 'unauthorized', 'authentication required');
      if (project) setRequestHeader(req, PROJECT_HEADER, project.id);
      if (req.headers['x-request-id'] === undefined) setRequestHeader(req, 'x-request-id', randomUUID());
      return dispatch(service, req, res, exchange);
    }
    if (service === 'kv' && underPrefix(path, '/v1/replicate')) return kvFeedRefused(res);
    if (!authenticator || !Authenticator.hasCredentials(req)) return forward(req, res, exchange, rule, service, project, ANONYMOUS);
    // Registry pushes reach the run service on api., the bare domain and IP hosts too; a key's
    // scopes are checked against run.<domain> wherever the push came in (run.md §1).
    const scopeHost = service === 'run' ? `run.${domain}` : (exchange.host ?? '');
    const outcome = authenticator.authenticate(req, { host: scopeHost, project, keyProjectApplies: service === 'kv' });
    if (!(outcome instanceof Promise)) return forward(req, res, exchange, rule, service, project, outcome);
    outcome.then((result) => forward(req, res, exchange, rule, service, project, result)).catch(fail(res));
  };

  const fail = (res: ServerResponse) => (error: unknown) => {
    logger.error({ err: error }, 'gateway request failed');
    sendError(res, 500, 'internal_error', 'internal error');
  };

  return (req: IncomingMessage, res: ServerResponse): void => {
    const exchange: Exchange = { start: performance.now(), host: null, upstream: 'none' };
    res.once('close', () => finish(req, res, exchange));
    if (!trusted) {
      removeRequestHeaders(req, FORGEABLE_HEADERS);
      if (!removeHopByHop(req)) return sendError(res, 400, 'bad_request', 'the Connection header may not name a header the gateway sets');
    }
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query >= 0 ? url.slice(0, query) : url;
    const target = resolveRoute(req.headers.host, path, domain);
    if (target.kind === 'no_route') return sendError(res, 404, 'no_route', `no route for host ${req.headers.host ?? ''}`);
    const host = hostName(req.headers.host);
    exchange.host = host;
    if (target.kind === 'no_prefix') return sendError(res, 404, 'not_found', `no route for ${req.method ?? 'GET'} ${path}`);
    const label = target.kind === 'project' ? target.slug : host === domain || !host.endsWith(`.${domain}`) ? 'api' : host.slice(0, -(domain.length + 1));

    if (target.kind === 'project') {
      projects
        .bySlug(target.slug)
        .then((project) => {
          exchange.project = project;
          if (!project) {
            exchange.host = null;
            return sendError(res, 404, 'no_route', `no route for host ${req.headers.host ?? ''}`);
          }
          admit(req, res, exchange, label, path, 'lambda', project);
        })
        .catch(fail(res));
      return;
    }
    const service = target.kind === 'gateway' ? 'gateway' : target.service;
    admit(req, res, exchange, label, path, service, null);
  };
}

export interface Listener {
  readonly server: http.Server;
  readonly port: number;
  close(): Promise<void>;
}

const IDLE_TIMEOUT_MS = 5 * 60_000;

export interface ListenOptions {
  /**
   * A request body that sends no byte for this long (while the server is ready to read) is cut:
   * 408 when nothing was answered yet, then the connection closes. 0 = never. A long upload whose
   * bytes keep arriving is never cut, and neither is one the server itself is slow to read.
   */
  bodyIdleTimeoutMs?: number;
  /** Open connections one client address may hold; a connection beyond it is closed at once. */
  maxConnectionsPerAddress?: number;
}

/**
 * Starts a listener. No request timeout (long uploads and streams), idle timeouts instead;
 * `close()` waits briefly for in-flight requests, then cuts what is left (open streams).
 */
export async function listen(handler: http.RequestListener, port: number, host: string, options: ListenOptions = {}): Promise<Listener> {
  const bodyIdleMs = options.bodyIdleTimeoutMs ?? 0;
  const guarded: http.RequestListener = bodyIdleMs > 0 ? (req, res) => (watchBody(req, res, bodyIdleMs), handler(req, res)) : handler;
  const server = http.createServer({ requestTimeout: 0, headersTimeout: 60_000, keepAliveTimeout: 65_000 }, guarded);
  // A connection with no traffic either way for this long is closed; streams send heartbeats.
  server.timeout = IDLE_TIMEOUT_MS;
  if (options.maxConnectionsPerAddress !== undefined) limitConnections(server, options.maxConnectionsPerAddress);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 2_000).unref();
      }),
  };
}

/** Closes a new connection at once when its address already holds `max` open ones. */
function limitConnections(server: http.Server, max: number): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
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
      const body = JSON.stringify(envelope(408, 'request_timeout', `no part of the request body arrived for ${idleMs / 1000} s`));
      res.writeHead(408, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' });
      res.end(body, () => socket.destroy());
      setTimeout(() => socket.destroy(), 1_000).unref();
    } else {
      socket.destroy();
    }
  }, idleMs);
  timer.unref();
  res.once('close', () => clearInterval(timer));
}
