import type { Exchange } from '../exchange.ts';
import { hostName } from '../../core/host.ts';

/**
 * Runs when the response closes, however the exchange ended (answered, cut, or the client left):
 * counts it in the stats and writes its access-log line.
 */
export function finish(exchange: Exchange): void {
  const { req, res, ctx } = exchange;
  const servingNs = Math.round((performance.now() - exchange.start) * 1e6);
  ctx.stats.record(exchange.host, servingNs);
  if (!ctx.logAccess) return;
  const identity = exchange.outcome?.kind === 'authenticated' ? exchange.outcome.identity : null;
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  // The query string is left out: it may carry tokens.
  ctx.accessLog.info({
    duration_ms: Math.round(servingNs / 1e4) / 100,
    client: ctx.proxies ? ctx.proxies.clientAddress(req) : req.socket.remoteAddress,
    method: req.method,
    host: exchange.host ?? hostName(req.headers.host),
    // As the client sent it: with the front door's `/services/<name>` prefix the gateway stripped.
    path: exchange.path !== '' ? exchange.prefix + exchange.path : query >= 0 ? url.slice(0, query) : url,
    status: res.statusCode,
    aborted: !res.writableFinished || undefined,
    auth: identity?.auth?.method ?? (ctx.trusted ? 'internal' : 'anonymous'),
    user: identity?.user.id,
    project: exchange.project?.id,
    upstream: exchange.upstream,
    upstream_ms: exchange.upstreamMs,
    request_id: req.headers['x-request-id'],
    user_agent: req.headers['user-agent'],
  });
}
