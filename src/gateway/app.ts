import { STATUS_CODES } from 'node:http';
import { Type } from 'typebox';
import { request as undiciRequest } from 'undici';
import type { FastifyBaseLogger } from 'fastify';
import { SERVICE_NAMES, type RoutePolicyRule, type ServiceName } from '../config.ts';
import { DEFAULT_POLICY_RULES } from './policy.ts';
import { createServiceApp, type ServiceApp } from '../core/app.ts';
import { hostName } from '../core/host.ts';
import { identityOf, requireIdentity } from '../core/identity.ts';
import type { SqlConnection } from '../store/db.ts';
import { listAllProjects, type Project } from '../services/apikeys/index.ts';
import { platformDocument } from './platform-document.ts';
import { Readiness, registerReadiness } from './readiness.ts';
import { apiPrefixes, PLATFORM_HOSTS } from './routing.ts';
import type { GatewayStats } from './stats.ts';
import {
  ANONYMOUS,
  named,
  openApiDocument,
  SIGNED_IN,
  SIGNED_IN_OR_ANONYMOUS,
  type RouteDocs,
} from '../core/openapi.ts';

export interface GatewayAppOptions {
  version: string;
  logger: FastifyBaseLogger;
  domain: string;
  connection: SqlConnection;
  stats: GatewayStats;
  /** Service apps in this process (filled in once they are built). */
  services: ReadonlyMap<ServiceName, ServiceApp>;
  /** Base URLs of services in other processes. */
  upstreamUrls: Readonly<Partial<Record<ServiceName, string>>>;
  /** This instance's readiness (`GET /readyz`, readiness.ts); by default one on `connection`. */
  readiness?: Readiness;
  /** The route policy rules of the settings (`gateway.routes`), listed by `GET /v0/routes`. */
  policyRules?: readonly RoutePolicyRule[];
}

const PROBE_TIMEOUT_MS = 2_000;
/** Every service serves its OpenAPI document publicly; the lambda service's is `/openapi` (src/services/lambda/README.md, OpenAPI). */
const probePath = (service: ServiceName) => (service === 'lambda' ? '/openapi' : '/openapi.json');

const statusRow = Type.Object({
  id: Type.String(),
  name: Type.String(),
  host: Type.String(),
  status: Type.Integer(),
  statusText: Type.String(),
});
const statsRow = Type.Object({
  host: Type.String(),
  served_requests: Type.Integer(),
  server_errors: Type.Integer({
    description: 'of them, answered with a 5xx status (beyond the reference: for error rates)',
  }),
  serving_time: Type.String({ description: 'Go duration' }),
  latency_avg: Type.String({ description: 'Go duration' }),
  uptime: Type.String({ description: 'Go duration' }),
  start_timestamp: Type.String({ description: 'RFC 3339 UTC' }),
});
const instanceRow = Type.Object({
  id: Type.String(),
  host: Type.String({ description: "The machine's host name" }),
  pid: Type.Integer(),
  version: Type.String(),
  services: Type.Array(Type.String(), {
    description: 'The services the instance runs (the gateway runs in every one)',
  }),
  started_at: Type.String({ description: 'RFC 3339 UTC' }),
  last_seen: Type.String({ description: 'Its last heartbeat, RFC 3339 UTC' }),
  served_requests: Type.Integer({ description: 'Its * count since it started' }),
  answering: Type.Boolean({ description: 'True for the instance that answered this request' }),
});
const errorBody = named(
  'Error',
  Type.Object({ error: Type.Object({ status: Type.Integer(), code: Type.String(), message: Type.String() }) }),
);

/**
 * The gateway's own endpoints on `gateway.<domain>` (and `/version`, `/v0/…`, `/openapi.json` on
 * `api.<domain>`): version, routing table, statistics, health of every backend, a protected
 * test endpoint and the OpenAPI document (README: the `stats.ts`, `app.ts` row; root README.md, Addressing).
 */
export async function buildGatewayApp(options: GatewayAppOptions): Promise<ServiceApp> {
  const { domain, services, upstreamUrls, connection, stats } = options;
  const app = await createServiceApp({
    name: 'gateway',
    title: 'Stratus API Gateway',
    domain,
    openapiPath: null,
    version: options.version,
    logger: options.logger,
    description: 'The Stratus gateway: routing by virtual host and path, authentication, statistics and health.',
  });

  app.get(
    '/version',
    {
      schema: {
        operationId: 'getVersion',
        security: ANONYMOUS,
        summary: 'The running Stratus version (plain text)',
        response: { 200: Type.String({ description: 'The version, e.g. 0.1.0' }) },
        openapi: { responses: { 200: { 'text/plain': null } } } satisfies RouteDocs,
      },
    },
    async (_request, reply) => reply.type('text/plain; charset=utf-8').send(options.version),
  );

  // Project rows (ids, names, hosts) are shown to their owners only: anonymous callers and other
  // users see the platform's own hosts (issue 17, item 14; SECURITY.md).
  const projectsOf = async (
    request: Parameters<typeof identityOf>[0],
  ): Promise<{ mine: Project[]; others: Project[] }> => {
    const user = identityOf(request)?.user.id;
    const all = await listAllProjects(connection);
    return {
      mine: all.filter((p) => user !== undefined && p.owners.includes(user)),
      others: all.filter((p) => user === undefined || !p.owners.includes(user)),
    };
  };
  const projectNote = 'Project hosts appear only for a signed-in caller who owns the project.';

  app.get(
    '/v0/virtualhosts',
    {
      schema: {
        operationId: 'listVirtualHosts',
        security: SIGNED_IN_OR_ANONYMOUS,
        summary: "Host names the gateway serves: platform hosts, then the caller's project hosts",
        description: projectNote,
        response: { 200: Type.Array(Type.String(), { description: 'Host names without ports' }) },
      },
    },
    async (request) => [
      ...PLATFORM_HOSTS.map((h) => `${h}.${domain}`),
      ...(await projectsOf(request)).mine.map((p) => `${p.slug}.${domain}`),
    ],
  );

  app.get(
    '/v0/stats',
    {
      schema: {
        operationId: 'getStats',
        security: SIGNED_IN_OR_ANONYMOUS,
        summary: 'Traffic statistics of the whole platform: the sum over its live instances',
        description: `${projectNote} The * row counts every request, project hosts included. Each instance counts a request when its response has finished (so an answer never counts itself) and publishes its counters every STATS_FLUSH_INTERVAL seconds; the answer adds the answering instance's current counters to the figures the other live instances published. An instance that closes, or misses its heartbeats for INSTANCE_TIMEOUT seconds, leaves the sum. uptime and start_timestamp are those of the longest-running live instance. GET /v0/instances lists the instances.`,
        response: {
          200: Type.Array(statsRow, { description: 'Rows *, -noroute-, then each host in order of first request' }),
        },
      },
    },
    async (request) => {
      const [rows, { others }] = await Promise.all([stats.platformRows(), projectsOf(request)]);
      if (others.length === 0) return rows;
      const hidden = new Set(others.map((p) => `${p.slug}.${domain}`));
      return rows.filter((row) => !hidden.has(row.host));
    },
  );

  app.get(
    '/v0/instances',
    {
      schema: {
        operationId: 'listInstances',
        security: SIGNED_IN,
        summary: 'The live instances of the platform, oldest first (signed-in callers)',
        description:
          'Every Stratus process of the platform that has heartbeated within INSTANCE_TIMEOUT seconds, with the services it runs and its own * count (as it last published it; the answering instance now). Machine host names are shown to authenticated callers only.',
        response: { 200: Type.Object({ instances: Type.Array(instanceRow) }), 401: errorBody },
      },
    },
    async (request) => {
      requireIdentity(request);
      return { instances: await stats.instances() };
    },
  );

  const policyRule = Type.Object({
    host: Type.String({ description: 'a host label (api, a service, a project slug, <slug>.run) or *' }),
    prefix: Type.String(),
    auth: Type.Union([Type.Literal('require'), Type.Literal('optional')]),
  });
  app.get(
    '/v0/routes',
    {
      schema: {
        operationId: 'listRoutes',
        security: SIGNED_IN,
        summary: 'How the gateway routes and which routes need authentication (signed-in callers)',
        description:
          "The front door's path prefixes and their services (longest first), then the route policy: the configured rules (stratus.config.json gateway.routes) before the built-in ones; the first rule whose host and prefix match decides.",
        response: {
          200: Type.Object({
            api_prefixes: Type.Array(Type.Object({ prefix: Type.String(), service: Type.String() })),
            policies: Type.Object({ configured: Type.Array(policyRule), defaults: Type.Array(policyRule) }),
          }),
          401: errorBody,
        },
      },
    },
    async (request) => {
      requireIdentity(request);
      return {
        api_prefixes: [...apiPrefixes()],
        policies: { configured: [...(options.policyRules ?? [])], defaults: [...DEFAULT_POLICY_RULES] },
      };
    },
  );

  /** Probes a service with GET of its OpenAPI document: in process without a socket, remote over HTTP. */
  const probe = async (service: ServiceName): Promise<number> => {
    const app = services.get(service);
    if (app) {
      const timeout = new Promise<number>((resolve) => setTimeout(() => resolve(504), PROBE_TIMEOUT_MS).unref());
      const answer = app
        .inject({ method: 'GET', url: probePath(service), headers: { host: `${service}.${domain}` } })
        .then(
          (r) => r.statusCode,
          () => 500,
        );
      return Promise.race([answer, timeout]);
    }
    const url = upstreamUrls[service];
    if (!url) return 503;
    try {
      const response = await undiciRequest(`${url}${probePath(service)}`, {
        headers: { host: `${service}.${domain}` },
        headersTimeout: PROBE_TIMEOUT_MS,
        bodyTimeout: PROBE_TIMEOUT_MS,
      });
      await response.body.dump();
      return response.statusCode;
    } catch (error) {
      return (error as { code?: string }).code === 'UND_ERR_HEADERS_TIMEOUT' ? 504 : 502;
    }
  };
  const row = (id: string, name: string, host: string, status: number) => ({
    id,
    name,
    host,
    status,
    statusText: `${status} ${STATUS_CODES[status] ?? ''}`.trim(),
  });

  app.get(
    '/v0/status',
    {
      schema: {
        operationId: 'getStatus',
        security: SIGNED_IN_OR_ANONYMOUS,
        summary:
          "Health of every backend service, then of the caller's project hosts, then of the platform's live instances",
        description: `${projectNote} Each service is probed with GET of its OpenAPI document (/openapi.json; /openapi for lambda) (${PROBE_TIMEOUT_MS} ms timeout, all in parallel); a project host's status is that of the lambda service that serves it. 503 = not running anywhere known, 502 = unreachable, 504 = no answer in time. A signed-in caller also gets one row per live instance (id instance-…, name "instance <pid>@<host>", host its machine's host name, status 200: it heartbeated within INSTANCE_TIMEOUT seconds).`,
        response: {
          200: Type.Array(statusRow, {
            description: 'One row per service, then one per project, then one per live instance',
          }),
        },
      },
    },
    async (request) => {
      const names = SERVICE_NAMES;
      const signedIn = identityOf(request) !== null;
      const [statuses, { mine: projects }, instances] = await Promise.all([
        Promise.all(names.map(probe)),
        projectsOf(request),
        signedIn ? stats.instances() : [],
      ]);
      const lambda = statuses[names.indexOf('lambda')] ?? 503;
      return [
        ...names.map((name, i) => row(name, name, `${name}.${domain}`, statuses[i] ?? 503)),
        ...projects.map((p) => row(p.id, p.name, `${p.slug}.${domain}`, lambda)),
        ...instances.map((i) => row(i.id, `instance ${i.pid}@${i.host}`, i.host, 200)),
      ];
    },
  );

  app.get(
    '/v0/secret',
    {
      schema: {
        operationId: 'checkSecret',
        security: SIGNED_IN,
        summary: 'Protected test endpoint: OK for any authenticated caller',
        response: { 200: Type.String({ description: 'OK' }), 401: errorBody },
        openapi: { responses: { 200: { 'text/plain': null } } } satisfies RouteDocs,
      },
    },
    async (request, reply) => {
      requireIdentity(request);
      return reply.type('text/plain; charset=utf-8').send('OK');
    },
  );

  registerReadiness(app, options.readiness ?? new Readiness(connection.database, domain));

  // Listed in its own document (README: The gateway's own OpenAPI document). On the front door
  // (not gateway.<domain>, not reached under /services/gateway) it is the merged platform document.
  const gatewayLabel = `gateway.${domain}`;
  app.get(
    '/openapi.json',
    {
      schema: {
        operationId: 'getOpenApiDocument',
        security: ANONYMOUS,
        summary: "This OpenAPI document; on the front door, the platform's merged document",
        response: { 200: Type.Object({}, { additionalProperties: true, description: 'OpenAPI 3.0.3 document' }) },
      },
    },
    async (request) => {
      const own = openApiDocument(app, request);
      const frontDoor =
        hostName(request.headers.host) !== gatewayLabel && request.headers['x-forwarded-prefix'] === undefined;
      return frontDoor ? platformDocument({ version: options.version, domain, services, upstreamUrls }, own) : own;
    },
  );
  return app;
}
