import { DONE, refuse, type Exchange } from '../exchange.ts';

/**
 * The last step: the request goes to the gateway's own app or a service app in this process
 * (`app.routing`, no socket), or is proxied to a service in another process; a service running
 * nowhere known is 503.
 */
export function dispatch(exchange: Exchange): typeof DONE {
  const { req, res, ctx, service } = exchange;
  if (service === 'gateway') {
    exchange.upstream = 'gateway';
    ctx.gateway.routing(req, res);
    return DONE;
  }
  const app = ctx.services.get(service);
  if (app) {
    exchange.upstream = `inproc:${service}`;
    app.routing(req, res);
    return DONE;
  }
  const proxy = ctx.upstreams.get(service);
  if (proxy) {
    exchange.upstream = service;
    // The upstream's internal port routes by the same Host and path: it strips the prefix itself.
    if (exchange.prefix !== '') req.url = exchange.prefix + (req.url ?? '/');
    void proxy.forward(req, res, {
      onUpstreamHeaders: (elapsedMs) => {
        exchange.upstreamMs = elapsedMs;
      },
    });
    return DONE;
  }
  exchange.upstream = 'none';
  return refuse(exchange, 503, 'service_unavailable', `the ${service} service is not running on this instance`);
}
