// Traffic to running containers (service README: Traffic). The gateway routes
// `<slug>.run.<domain>` to this service like any of its hosts (its policies, authentication and
// access log apply); here the request is streamed to the container's loopback port and the answer
// streamed back, with what user code may not see or set taken out on the way.
import http from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { envelope as errorEnvelope } from '../../core/errors.ts';
import { hopByHopHeaderNames } from '../../core/hop-by-hop.ts';
import { hostName } from '../../core/host.ts';
import { isPlatformCookie } from '../../core/platform-cookie.ts';
import { visitorHeaders } from '../../core/visitor.ts';
import type { RunRepository } from './repository.ts';

/** How long a host's route (repository, port) is reused before it is read again. */
const ROUTE_TTL_MS = 1000;

interface Route {
  repository: string;
  running: boolean;
  port: number | null;
}

export class ContainerTraffic {
  private readonly suffix: string;
  private readonly routes = new Map<string, { route: Route | null; until: number }>();
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

  constructor(
    domain: string,
    private readonly repository: Pick<RunRepository, 'routeBySlug'>,
  ) {
    this.suffix = `.run.${domain}`;
  }

  /** The slug of a container host (`<slug>.run.<domain>`), else null. */
  slugOf(host: string | undefined): string | null {
    const name = hostName(host);
    if (!name.endsWith(this.suffix)) return null;
    const slug = name.slice(0, -this.suffix.length);
    return /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/.test(slug) ? slug : null;
  }

  private async route(slug: string): Promise<Route | null> {
    const now = Date.now();
    const cached = this.routes.get(slug);
    if (cached && cached.until > now) return cached.route;
    const route = await this.repository.routeBySlug(slug);
    if (this.routes.size > 10_000) this.routes.clear();
    this.routes.set(slug, { route, until: now + ROUTE_TTL_MS });
    return route;
  }

  /** Answers a request to a container host: proxied to its container, or an error envelope. */
  async handle(slug: string, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const route = await this.route(slug);
    const host = hostName(request.headers.host);
    if (!route) {
      await reply.code(404).send(errorEnvelope(404, 'no_route', `no route for host ${host}`));
      return;
    }
    if (!route.running || route.port === null) {
      await reply
        .code(503)
        .send(errorEnvelope(503, 'not_running', `${route.repository} is not running (start it from the console)`));
      return;
    }
    reply.hijack();
    this.forward(route.port, request, reply.raw);
  }

  private forward(port: number, request: FastifyRequest, res: http.ServerResponse): void {
    const req = request.raw;
    // The visitor as user code may see them (core/visitor.ts), then without hop-by-hop headers.
    const headers: http.OutgoingHttpHeaders = visitorHeaders(request);
    for (const name of hopByHopHeaderNames(req.headers)) delete headers[name];
    if (req.headers['content-length'] === undefined) delete headers['content-length'];
    const upstream = http.request(
      { host: '127.0.0.1', port, method: req.method, path: req.url, headers, agent: this.agent },
      (answer) => {
        const out: http.OutgoingHttpHeaders = { ...answer.headers };
        for (const name of hopByHopHeaderNames(answer.headers)) delete out[name];
        const cookies = answer.headers['set-cookie'];
        if (cookies) out['set-cookie'] = cookies.filter((c) => !isPlatformCookie(c));
        delete out['clear-site-data'];
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
        answer.pipe(res);
        answer.once('error', () => res.destroy());
      },
    );
    upstream.once('error', (error) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const body = JSON.stringify(
        errorEnvelope(
          502,
          'bad_gateway',
          `the container did not answer: ${(error as NodeJS.ErrnoException).code ?? error.message}`,
        ),
      );
      res.writeHead(502, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
      });
      res.end(body);
    });
    // A visitor who leaves stops the container's answer too.
    res.once('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  }

  close(): void {
    this.agent.destroy();
  }
}
