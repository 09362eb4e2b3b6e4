import type { FastifyRequest, FastifySchema } from 'fastify';
import type { TSchema } from 'typebox';
import type { ServiceApp } from './app.ts';
import { callerSchemeAndPort } from './host.ts';

// What every service's OpenAPI document shares (issue 21, item 3: documents fit for generators):
// the credentials callers really send, the servers a service is reachable at, named shared schemas,
// wildcard paths as a named parameter, and document-only annotations of raw bodies and non-JSON
// responses. Everything here changes documents only: routes, validation and serialization are
// untouched (the annotations below are keys Fastify ignores, read by the swagger transform).

/** A security requirement list of an operation (`[]`: anonymous). */
export type SecurityRequirements = readonly Readonly<Record<string, readonly string[]>>[];

/**
 * The credentials the public port accepts (root README.md, Signing in) and the scheduler's own key
 * (src/services/scheduler/README.md). Backends see the gateway's identity header instead, which
 * the public port strips from clients: it is not what a caller sends, so documents do not show it.
 */
export const SECURITY_SCHEMES = {
  apiKey: {
    type: 'apiKey',
    in: 'header',
    name: 'Api-Key',
    description: 'A platform API key (POST /v0/apikeys); sent together with Api-Secret',
  },
  apiSecret: { type: 'apiKey', in: 'header', name: 'Api-Secret', description: 'The secret of the Api-Key' },
  apiKeyBasic: {
    type: 'http',
    scheme: 'basic',
    description: 'The API key as user name and its secret as password (container clients)',
  },
  bearer: {
    type: 'http',
    scheme: 'bearer',
    description: 'The session token from POST /v0/login (auth), or an ID token of a configured OpenID Connect provider',
  },
  session: {
    type: 'apiKey',
    in: 'cookie',
    name: 'stratus_session',
    description: 'The session cookie set by the auth service on login (browsers)',
  },
  schedulerApiKey: {
    type: 'apiKey',
    in: 'header',
    name: 'X-API-Key',
    description: 'A scheduler API key (SCHEDULER_API_KEYS, or the key generated on first start)',
  },
  schedulerBearer: { type: 'http', scheme: 'bearer', description: 'A scheduler API key as a bearer token' },
} as const;

type SchemeName = keyof typeof SECURITY_SCHEMES;
const requirement = (...names: SchemeName[]) => Object.fromEntries(names.map((name) => [name, [] as string[]]));

/** A signed-in caller: an API key pair (headers or Basic), a bearer token or the session cookie. */
export const SIGNED_IN: SecurityRequirements = [
  requirement('apiKey', 'apiSecret'),
  requirement('apiKeyBasic'),
  requirement('bearer'),
  requirement('session'),
];
/** An API key pair only: a key of the service's own (a logger's), sent like a platform key. */
export const API_KEY_PAIR: SecurityRequirements = [requirement('apiKey', 'apiSecret')];
/** Anyone; a signed-in caller may get more (their own rows, their identity). */
export const SIGNED_IN_OR_ANONYMOUS: SecurityRequirements = [...SIGNED_IN, {}];
/** No credentials read. */
export const ANONYMOUS: SecurityRequirements = [];
/** The scheduler's own key, in X-API-Key or as a bearer token. */
export const SCHEDULER_KEY: SecurityRequirements = [requirement('schedulerApiKey'), requirement('schedulerBearer')];

/** The key of a shared schema's component name; hoisted into `components.schemas` by `finishDocument`. */
const COMPONENT = 'x-component-name';

/**
 * Marks `schema` as the shared shape `name`: documents show it once under `components.schemas`
 * and refer to it. The mark is an annotation keyword that validators and serializers ignore.
 */
export function named<T extends TSchema>(name: string, schema: T): T {
  return { ...schema, [COMPONENT]: name };
}

/** Bytes of any kind: a raw body or a downloaded file. */
export const BINARY = { type: 'string', format: 'binary' } as const;

/**
 * Document-only facts of a route, under the key `openapi` of its schema (Fastify ignores the key;
 * the swagger transform reads it and drops it).
 */
export interface RouteDocs {
  /**
   * Response bodies by status and media type where they are not (only) JSON: NDJSON and SSE
   * streams, text, bytes. A media type mapped to `null` carries the route's response schema of
   * that status; an empty map is a response without a body.
   */
  responses?: Readonly<Record<number, Readonly<Record<string, object | null>>>>;
  /** A body the handler reads raw (never parsed): its media types, what it holds, its schema (bytes by default). */
  rawBody?: { mediaTypes: readonly string[]; description: string; schema?: object };
}

interface RouteSchema {
  openapi?: RouteDocs;
  response?: Record<string, unknown>;
  body?: unknown;
  [key: string]: unknown;
}

/** The swagger `transform`: applies a route's `openapi` annotations to its copy of the schema. */
export function transformRouteSchema({ schema, url }: { schema: FastifySchema; url: string }): {
  schema: FastifySchema;
  url: string;
} {
  const route = schema as RouteSchema | undefined;
  if (!route?.openapi) return { schema, url };
  const { openapi: docs, ...rest } = route;
  const out: RouteSchema = { ...rest };
  if (docs.responses) {
    const response: Record<string, unknown> = { ...(rest.response ?? {}) };
    for (const [status, media] of Object.entries(docs.responses)) {
      const declared = response[status] as { description?: string } | undefined;
      const content = Object.entries(media).map(([type, body]) => [type, { schema: body ?? declared ?? BINARY }]);
      // A response with `content` but no media types is shown without a body.
      response[status] =
        content.length === 0
          ? { type: 'null', description: declared?.description ?? 'No body' }
          : {
              ...(declared?.description ? { description: declared.description } : {}),
              content: Object.fromEntries(content),
            };
    }
    out.response = response;
  }
  if (docs.rawBody) {
    const schemaOfBody = { ...(docs.rawBody.schema ?? BINARY), description: docs.rawBody.description };
    out.body = { content: Object.fromEntries(docs.rawBody.mediaTypes.map((type) => [type, { schema: schemaOfBody }])) };
  }
  return { schema: out as FastifySchema, url };
}

export interface OpenApiOperation {
  operationId?: string;
  security?: SecurityRequirements;
  parameters?: { name: string; in: string; [key: string]: unknown }[];
  requestBody?: unknown;
  responses?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface OpenApiDocument {
  openapi: string;
  info: Record<string, unknown>;
  servers?: { url: string; description?: string }[];
  paths: Record<string, Record<string, OpenApiOperation>>;
  components?: { schemas?: Record<string, unknown>; securitySchemes?: Record<string, unknown> };
  [key: string]: unknown;
}

/** The keys of a path item that are operations (OpenAPI 3.0, Path Item Object). */
export const OPERATION_METHODS: ReadonlySet<string> = new Set([
  'get',
  'put',
  'post',
  'delete',
  'options',
  'head',
  'patch',
  'trace',
]);

/** The name Fastify's `*` wildcard gets in documents: generators read `{*}` as a template operator. */
export const WILDCARD_PARAMETER = 'path';

/**
 * What every document gets once its paths are complete: Fastify's `*` as the named parameter
 * `{path}` (reserved characters such as `/` allowed), a method suffix on the operation ids of a
 * route registered for several methods, shared schemas hoisted into `components.schemas`, and the
 * security schemes that its operations use.
 */
export function finishDocument(document: OpenApiDocument): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {};
  for (const [path, operations] of Object.entries(document.paths)) {
    const named = path.replace('{*}', `{${WILDCARD_PARAMETER}}`);
    for (const [method, shared] of Object.entries(operations)) {
      if (!OPERATION_METHODS.has(method)) continue;
      // The methods of one route share one operation object: each gets its own.
      const operation = { ...shared };
      operations[method] = operation;
      if (!operation.parameters) continue;
      operation.parameters = operation.parameters.map((parameter) =>
        parameter.in === 'path' && parameter.name === '*'
          ? {
              ...parameter,
              name: WILDCARD_PARAMETER,
              allowReserved: true,
              description: parameter.description ?? 'The rest of the path; may contain `/`',
            }
          : parameter,
      );
    }
    paths[named] = operations;
  }
  document.paths = paths;
  suffixSharedOperationIds(document);
  hoistNamedSchemas(document);
  const used = new Set<string>();
  for (const operations of Object.values(document.paths))
    for (const operation of Object.values(operations))
      for (const group of operation.security ?? []) for (const name of Object.keys(group)) used.add(name);
  document.components = {
    ...document.components,
    securitySchemes: Object.fromEntries(Object.entries(SECURITY_SCHEMES).filter(([name]) => used.has(name))),
  };
  return document;
}

/** One route for several methods shares its schema's operationId: each method gets its own. */
function suffixSharedOperationIds(document: OpenApiDocument): void {
  const count = new Map<string, number>();
  for (const operations of Object.values(document.paths))
    for (const operation of Object.values(operations))
      if (operation.operationId) count.set(operation.operationId, (count.get(operation.operationId) ?? 0) + 1);
  for (const operations of Object.values(document.paths)) {
    const ids = Object.values(operations).map((o) => o.operationId);
    for (const [method, operation] of Object.entries(operations)) {
      const id = operation.operationId;
      const sameRoute = ids.filter((other) => other === id).length;
      if (id && sameRoute > 1 && sameRoute === count.get(id))
        operation.operationId = `${id}${method[0]!.toUpperCase()}${method.slice(1)}`;
    }
  }
}

/** Replaces every schema marked by `named` with a reference to one `components.schemas` entry. */
function hoistNamedSchemas(document: OpenApiDocument): void {
  const schemas: Record<string, unknown> = { ...document.components?.schemas };
  const seen = new Map<string, string>();
  const visit = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(visit);
    if (node === null || typeof node !== 'object') return node;
    const record = node as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(record)) if (key !== COMPONENT) out[key] = visit(value);
    const name = record[COMPONENT];
    if (typeof name !== 'string') return out;
    const text = JSON.stringify(out);
    const earlier = seen.get(name);
    if (earlier !== undefined && earlier !== text)
      throw new Error(`OpenAPI: two different schemas are both named ${name}`);
    seen.set(name, text);
    schemas[name] = out;
    return { $ref: `#/components/schemas/${name}` };
  };
  document.paths = visit(document.paths) as OpenApiDocument['paths'];
  document.components = { ...document.components, schemas };
}

/**
 * Declares `document` OpenAPI 3.1.0 (the scheduler's and the document database's references ask
 * for it); schemas generated in 3.0 form say `nullable`, which 3.1 spells as a `null` type.
 */
export function asOpenApi31(document: OpenApiDocument): void {
  document.openapi = '3.1.0';
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (node === null || typeof node !== 'object') return;
    const record = node as Record<string, unknown>;
    if (record.nullable === true) {
      delete record.nullable;
      if (typeof record.type === 'string') record.type = [record.type, 'null'];
    }
    Object.values(record).forEach(visit);
  };
  visit(document.paths);
  visit(document.components);
}

function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export interface DocumentAddress {
  /** Service name: its host label and its front-door prefix `/services/<name>`. */
  service: string;
  /** The platform domain (DOMAIN). */
  domain: string;
}

/**
 * Where the service is reachable, for the request that fetched the document: its own host
 * `<name>.<domain>` and the front door's `/services/<name>` (decision 47), with the scheme and port
 * the caller used (`X-Forwarded-Proto`/`-Host` from the gateway, else `Host`). When the document was
 * fetched under the front-door prefix (`X-Forwarded-Prefix`) that server comes first and is relative
 * (it resolves against the document's own address); otherwise the front door is given absolute,
 * since a relative `/services/<name>` would resolve against the service host.
 */
export function serversFor(
  request: FastifyRequest,
  { service, domain }: DocumentAddress,
): { url: string; description: string }[] {
  const { scheme, port } = callerSchemeAndPort(request.headers);
  const origin = (host: string) => `${scheme}://${host}${port ? `:${port}` : ''}`;
  const prefix = `/services/${service}`;
  const ownHost = { url: origin(`${service}.${domain}`), description: `The ${service} service's own host` };
  if (headerOf(request, 'x-forwarded-prefix') === prefix)
    return [{ url: prefix, description: 'The front door (this address), under /services/' + service }, ownHost];
  return [ownHost, { url: `${origin(domain)}${prefix}`, description: `The front door, under /services/${service}` }];
}

const finished = new WeakMap<ServiceApp, OpenApiDocument>();
const addresses = new WeakMap<ServiceApp, DocumentAddress>();

/** Records where `app` is reachable, for the servers of its document (createServiceApp calls it). */
export function setDocumentAddress(app: ServiceApp, address: DocumentAddress): void {
  addresses.set(app, address);
}

/**
 * The service's OpenAPI document as served: generated from its route schemas once (`extend` adds
 * what routes cannot say, before the finishing steps), with the servers of this request.
 */
export function openApiDocument(
  app: ServiceApp,
  request: FastifyRequest,
  extend?: (document: OpenApiDocument) => void,
): OpenApiDocument {
  const address = addresses.get(app);
  if (!address) throw new Error('openApiDocument: the app was not built by createServiceApp');
  let document = finished.get(app);
  if (!document) {
    document = structuredClone(app.swagger()) as unknown as OpenApiDocument;
    extend?.(document);
    finishDocument(document);
    finished.set(app, document);
  }
  return { ...document, servers: serversFor(request, address) };
}
