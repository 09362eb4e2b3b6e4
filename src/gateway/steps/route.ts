import { hostName } from '../../core/host.ts';
import { DONE, NEXT, refuse, type Exchange, type Verdict } from '../exchange.ts';
import { resolveRoute } from '../routing.ts';

/**
 * Host + path → the service, the host counted in the stats and the label the route policy is
 * looked up by. An unknown host is 404 `no_route` (counted as `-noroute-`); a path on
 * `api.<domain>` that no prefix claims is 404 `not_found` (counted under its host).
 */
export function route(exchange: Exchange): Verdict {
  const { req, ctx } = exchange;
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  const path = query >= 0 ? url.slice(0, query) : url;
  exchange.path = path;
  const target = resolveRoute(req.headers.host, path, ctx.domain);
  if (target.kind === 'no_route')
    return refuse(exchange, 404, 'no_route', `no route for host ${req.headers.host ?? ''}`);
  const host = hostName(req.headers.host);
  exchange.host = host;
  if (target.kind === 'no_prefix')
    return refuse(exchange, 404, 'not_found', `no route for ${req.method ?? 'GET'} ${path}`);
  const domain = ctx.domain;
  if (target.kind === 'project') {
    exchange.label = target.slug;
    exchange.slug = target.slug;
    exchange.service = 'lambda';
    return NEXT;
  }
  exchange.service = target.kind === 'gateway' ? 'gateway' : target.service;
  if (target.prefix !== undefined && path === target.prefix && (req.method === 'GET' || req.method === 'HEAD')) {
    // `/services/<name>` is a folder: pages under it (the console's) resolve relative URLs from
    // `/services/<name>/`, so the browser is sent there, as a web server does for a directory.
    exchange.res.writeHead(308, { location: `${path}/${query >= 0 ? url.slice(query) : ''}`, 'content-length': 0 });
    exchange.res.end();
    return DONE;
  }
  if (target.prefix !== undefined) {
    // `/services/<name>/…` on the front door: the service sees its own path, and the route
    // policy is its host's (root README.md, One base URL).
    exchange.prefix = target.prefix;
    exchange.path = path.slice(target.prefix.length) || '/';
    req.url = exchange.path + (query >= 0 ? url.slice(query) : '');
    exchange.label = exchange.service;
    return NEXT;
  }
  exchange.label = host === domain || !host.endsWith(`.${domain}`) ? 'api' : host.slice(0, -(domain.length + 1));
  return NEXT;
}

/** A project host `<slug>.<domain>` is served by the lambda service if the project exists; else 404 `no_route`. */
export function lookUpProject(exchange: Exchange): Verdict | Promise<Verdict> {
  const slug = exchange.slug;
  if (slug === null) return NEXT;
  return exchange.ctx.projects.bySlug(slug).then((project): Verdict => {
    exchange.project = project;
    if (project) return NEXT;
    exchange.host = null;
    return refuse(exchange, 404, 'no_route', `no route for host ${exchange.req.headers.host ?? ''}`);
  });
}
