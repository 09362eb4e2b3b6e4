import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import type { ServiceName } from '../config.ts';
import type { ServiceApp } from '../core/app.ts';
import { envelope } from '../core/errors.ts';
import { IDENTITY_HEADER, PROJECT_HEADER } from '../core/identity.ts';
import { removeRequestHeaders, setRequestHeader } from './headers.ts';
import { resolveRoute } from './routing.ts';

/** Looks up a project host's slug; null when no project has it. */
export type ProjectLookup = (slug: string) => Promise<{ id: string; slug: string } | null>;

export interface GatewayOptions {
  domain: string;
  /** Service apps running in this process, already `ready()`. */
  services: ReadonlyMap<ServiceName, ServiceApp>;
  gateway: ServiceApp;
  projects: ProjectLookup | null;
  logger: FastifyBaseLogger;
}

/** Client-sent identity headers that never pass the public port (decisions §2). */
const FORGEABLE_HEADERS = [IDENTITY_HEADER, PROJECT_HEADER];

function sendError(res: ServerResponse, status: number, code: string, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(envelope(status, code, message));
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/**
 * The request handler shared by both listeners. `trusted` is the internal port: identity headers
 * pass as sent. On the public port they are stripped first, whatever the route.
 */
export function createGatewayHandler(options: GatewayOptions, trusted: boolean) {
  const { domain, services, gateway, projects, logger } = options;

  const dispatch = (app: ServiceApp, req: IncomingMessage, res: ServerResponse) => app.routing(req, res);

  const serviceOrUnavailable = (service: ServiceName, req: IncomingMessage, res: ServerResponse) => {
    const app = services.get(service);
    if (app) dispatch(app, req, res);
    else sendError(res, 503, 'service_unavailable', `the ${service} service is not running on this instance`);
  };

  const routeProject = async (slug: string, req: IncomingMessage, res: ServerResponse) => {
    const project = projects ? await projects(slug) : null;
    if (!project) return sendError(res, 404, 'no_route', `no route for host ${req.headers.host ?? ''}`);
    setRequestHeader(req, PROJECT_HEADER, project.id);
    serviceOrUnavailable('lambda', req, res);
  };

  return (req: IncomingMessage, res: ServerResponse): void => {
    if (!trusted) removeRequestHeaders(req, FORGEABLE_HEADERS);
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query >= 0 ? url.slice(0, query) : url;
    const target = resolveRoute(req.headers.host, path, domain);
    switch (target.kind) {
      case 'service':
        return serviceOrUnavailable(target.service, req, res);
      case 'gateway':
        return dispatch(gateway, req, res);
      case 'project':
        routeProject(target.slug, req, res).catch((error: unknown) => {
          logger.error({ err: error }, 'project host lookup failed');
          sendError(res, 500, 'internal_error', 'internal error');
        });
        return;
      case 'no_route':
        return sendError(res, 404, 'no_route', `no route for host ${req.headers.host ?? ''}`);
      case 'no_prefix':
        return sendError(res, 404, 'not_found', `no route for ${req.method ?? 'GET'} ${path}`);
    }
  };
}

export interface Listener {
  readonly server: http.Server;
  readonly port: number;
  close(): Promise<void>;
}

const IDLE_TIMEOUT_MS = 5 * 60_000;

/**
 * Starts a listener. No request timeout (long uploads and streams), an idle timeout instead;
 * `close()` waits briefly for in-flight requests, then cuts what is left (open streams).
 */
export async function listen(handler: http.RequestListener, port: number, host: string): Promise<Listener> {
  const server = http.createServer({ requestTimeout: 0, headersTimeout: 60_000, keepAliveTimeout: 65_000 }, handler);
  // A connection with no traffic either way for this long is closed; streams send heartbeats.
  server.timeout = IDLE_TIMEOUT_MS;
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
