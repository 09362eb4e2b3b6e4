import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { ServiceName } from '../config.ts';
import type { ServiceApp } from '../core/app.ts';
import { envelope } from '../core/errors.ts';
import type { Authenticator, AuthOutcome } from './authenticate.ts';
import type { RoutePolicy } from './policy.ts';
import type { ProjectRef } from './projects.ts';
import type { UpstreamProxy } from './proxy.ts';
import type { TrustedProxies } from './client-address.ts';
import type { GatewayStats } from './stats.ts';
import type { PlatformMetrics, PortName } from '../metrics/index.ts';

export interface GatewayOptions {
  domain: string;
  /** Service apps running in this process, already `ready()`. */
  services: ReadonlyMap<ServiceName, ServiceApp>;
  /** Services running in other processes. */
  upstreams: ReadonlyMap<ServiceName, UpstreamProxy>;
  gateway: ServiceApp;
  projects: { bySlug(slug: string): Promise<ProjectRef | null>; originListed(origin: string): Promise<boolean> };
  /** Origins granted credentialed CORS besides the platform's own (`CORS_ORIGINS`, checked by `credentialedOrigins`); none when absent. */
  credentialedOrigins?: readonly string[];
  policy: (hostLabel: string, path: string) => RoutePolicy;
  /** Public port only: the authentication step. */
  authenticator: Authenticator | null;
  stats: GatewayStats;
  logger: FastifyBaseLogger;
  /** Public port: the proxies whose `X-Forwarded-For` names the client (client-address.ts); none when absent. */
  proxies?: TrustedProxies;
  /** The instance's metrics (counted per request, served at `/metrics`); none when absent. */
  metrics?: PlatformMetrics;
  /** Public port: the bearer token that opens `/metrics` there (`METRICS_TOKEN`); unset: not served there. */
  metricsToken?: string;
  /** Whether to write the access log (`ACCESS_LOG`); true when absent. */
  writeAccessLog?: boolean;
}

/** What one listener serves with: the options, which port it is, and its access logger. */
export interface GatewayContext extends GatewayOptions {
  /** The internal port: no authentication step, identity headers pass as sent. */
  trusted: boolean;
  /** The port's name in metrics. */
  port: PortName;
  /**
   * Who may read `/metrics` on this port: anyone (the internal port), a caller the token check
   * passes (the public port with `METRICS_TOKEN`), or nobody (null: the path is routed as any other).
   */
  metricsAllowed: true | ((authorization: string | undefined) => boolean) | null;
  accessLog: FastifyBaseLogger;
  /** Whether the access logger writes `info` lines (checked once, not per request). */
  logAccess: boolean;
}

/** A step's verdict: go on to the next step, or stop (the exchange is answered or handed on). */
export const NEXT = 'next';
export const DONE = 'done';
export type Verdict = typeof NEXT | typeof DONE;
/** Synchronous unless the step has to wait (a project lookup, an uncached credential check). */
export type Step = (exchange: Exchange) => Verdict | Promise<Verdict>;

/**
 * One request on its way through the gateway: what the steps have learnt so far. Every field is
 * set in the constructor so all exchanges share one shape.
 */
export class Exchange {
  /** performance.now() at arrival (ms, fractional). */
  readonly start = performance.now();
  /** The URL's path, without the query string (and without the front door's `/services/<name>` prefix). */
  path = '';
  /** The front door's `/services/<name>` prefix the path came under, stripped from `req.url`; '' when none. */
  prefix = '';
  /** Host name (without port) counted in the stats; null when the request matched no route. */
  host: string | null = null;
  /** Host label the route policy is looked up by: `api`, a service name or a project slug. */
  label = '';
  service: ServiceName | 'gateway' = 'gateway';
  /** The slug of a project host, until the project is looked up. */
  slug: string | null = null;
  project: ProjectRef | null = null;
  policy: RoutePolicy = 'optional';
  /** The authentication step's result (public port). */
  outcome: AuthOutcome | undefined = undefined;
  /** Where the request went, for the access log: `inproc:<service>`, a remote service, `gateway` or `none`. */
  upstream = 'none';
  /** Time to a remote upstream's response headers. */
  upstreamMs: number | undefined = undefined;
  /** `X-Request-Id` of this request (steps/request-id.ts), echoed in the response; '' until assigned. */
  requestId = '';
  /** The route pattern when the gateway answers by itself (`/metrics`); else the app's (routePatternOf). */
  route: string | undefined = undefined;

  constructor(
    readonly ctx: GatewayContext,
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
  ) {}
}

/** Answers with the JSON error envelope; once the head is out, the connection is cut instead. */
export function sendError(
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(envelope(status, code, message));
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** An early answer: the error is sent and the pipeline ends. */
export function refuse(
  exchange: Exchange,
  status: number,
  code: string,
  message: string,
  headers?: Record<string, string>,
): typeof DONE {
  sendError(exchange.res, status, code, message, headers);
  return DONE;
}
