import { createHash, timingSafeEqual } from 'node:crypto';
import { hostName } from '../../core/host.ts';
import { DONE, NEXT, refuse, sendError, type Exchange, type Verdict } from '../exchange.ts';
import { resolveRoute } from '../routing.ts';

export const METRICS_PATH = '/metrics';

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * Checks `Authorization: Bearer <token>` against the public port's token in constant time: both
 * sides are hashed first, so neither the comparison nor its length tells how much of a guess was
 * right.
 */
export function metricsTokenCheck(token: string): (authorization: string | undefined) => boolean {
  const expected = digest(token);
  return (authorization) => {
    if (authorization === undefined || !/^bearer /i.test(authorization)) return false;
    return timingSafeEqual(digest(authorization.slice(7).trim()), expected);
  };
}

/**
 * `GET /metrics` (and HEAD), answered by the gateway itself before routing (README.md: Metrics) on
 * the hosts the readiness check answers on: `gateway.<domain>`, `api.<domain>`, the bare domain,
 * an IP address and any host outside the domain (what a scraper sends); service and project hosts
 * keep their own paths. Always on the internal port; on the public port only when `METRICS_TOKEN`
 * is set, and then only with `Authorization: Bearer <token>` (401 otherwise). Without a token
 * the public port routes the path as any other (404).
 */
export function serveMetrics(exchange: Exchange): Verdict | Promise<Verdict> {
  const { req, ctx } = exchange;
  const url = req.url;
  // The request path's only cost: one comparison.
  if (url !== METRICS_PATH && !url?.startsWith(`${METRICS_PATH}?`)) return NEXT;
  const metrics = ctx.metrics;
  const allowed = ctx.metricsAllowed;
  if (metrics === undefined || allowed === null) return NEXT;
  if (req.method !== 'GET' && req.method !== 'HEAD') return NEXT;
  const target = resolveRoute(req.headers.host, '/', ctx.domain);
  if (target.kind === 'service' || target.kind === 'project') return NEXT;
  exchange.host = hostName(req.headers.host);
  exchange.service = 'gateway';
  exchange.path = METRICS_PATH;
  exchange.route = METRICS_PATH;
  exchange.upstream = 'gateway';
  if (allowed !== true && !allowed(req.headers.authorization))
    return refuse(exchange, 401, 'unauthorized', 'the metrics need Authorization: Bearer <METRICS_TOKEN>', {
      'www-authenticate': 'Bearer realm="metrics"',
    });
  return metrics.render().then(
    (text): Verdict => {
      const res = exchange.res;
      res.writeHead(200, {
        'content-type': metrics.contentType,
        'content-length': Buffer.byteLength(text),
        'cache-control': 'no-store',
      });
      res.end(req.method === 'HEAD' ? undefined : text);
      return DONE;
    },
    (): Verdict => {
      sendError(exchange.res, 500, 'internal_error', 'the metrics could not be read');
      return DONE;
    },
  );
}
