import type { Socket } from 'node:net';
import type { Exchange } from '../exchange.ts';
import { hostName } from '../../core/host.ts';
import { routePatternOf } from '../../core/app.ts';
import type { AuthKind } from '../../metrics/index.ts';

/** A connection's byte counts when its previous request finished: what a request adds is its own. */
const READ_MARK = Symbol('stratus.bytesRead');
const WRITTEN_MARK = Symbol('stratus.bytesWritten');
type MarkedSocket = Socket & { [READ_MARK]?: number; [WRITTEN_MARK]?: number };

/** Status counted for a request whose client left before the answer's head was sent (as nginx logs it). */
const CLIENT_LEFT = 499;

/**
 * Runs when the response closes, however the exchange ended (answered, cut, or the client left):
 * counts it in the stats and the metrics and writes its access-log line (README: Access log).
 */
export function finish(exchange: Exchange): void {
  const { req, res, ctx } = exchange;
  const elapsedMs = performance.now() - exchange.start;
  const servingNs = Math.round(elapsedMs * 1e6);
  ctx.stats.record(exchange.host, servingNs, res.headersSent ? res.statusCode : CLIENT_LEFT);
  // Bytes on the wire since the connection's previous request: this request's line, headers and
  // body as read so far, and its whole answer as written (requests on a connection take turns).
  const socket = req.socket as MarkedSocket;
  const read = socket.bytesRead;
  const written = socket.bytesWritten;
  const bytesIn = read - (socket[READ_MARK] ?? 0);
  const bytesOut = written - (socket[WRITTEN_MARK] ?? 0);
  socket[READ_MARK] = read;
  socket[WRITTEN_MARK] = written;
  const service = exchange.host === null ? 'none' : exchange.service;
  const route = exchange.route ?? routePatternOf(req);
  const outcome = exchange.outcome;
  const caller: AuthKind | 'internal' | undefined = ctx.trusted
    ? 'internal'
    : outcome === undefined
      ? undefined
      : outcome.kind === 'authenticated'
        ? outcome.credential
        : outcome.kind;
  ctx.metrics?.requestFinished(
    {
      port: ctx.port,
      service,
      route: route ?? 'other',
      method: req.method,
      status: res.headersSent ? res.statusCode : CLIENT_LEFT,
      seconds: elapsedMs / 1000,
      bytesIn,
      bytesOut,
    },
    caller === 'internal' ? undefined : caller,
  );
  if (!ctx.logAccess) return;
  const identity = outcome?.kind === 'authenticated' ? outcome.identity : null;
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  // No secret is ever written: the query string is left out (it may carry tokens), and of the
  // caller only the credential's kind, the user and the project, never a key, token or cookie.
  ctx.accessLog.info({
    request_id: exchange.requestId || undefined,
    duration_ms: Math.round(servingNs / 1e4) / 100,
    client: ctx.proxies ? ctx.proxies.clientAddress(req) : req.socket.remoteAddress,
    method: req.method,
    host: exchange.host ?? hostName(req.headers.host),
    // As the client sent it: with the front door's `/services/<name>` prefix the gateway stripped.
    path: exchange.path !== '' ? exchange.prefix + exchange.path : query >= 0 ? url.slice(0, query) : url,
    service,
    route,
    status: res.statusCode,
    aborted: !res.writableFinished || undefined,
    bytes_in: bytesIn,
    bytes_out: bytesOut,
    caller,
    auth: identity?.auth?.method ?? (ctx.trusted ? 'internal' : 'anonymous'),
    user: identity?.user.id,
    project: exchange.project?.id,
    upstream: exchange.upstream,
    upstream_ms: exchange.upstreamMs,
    user_agent: req.headers['user-agent'],
  });
}
