import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse, Server } from 'node:http';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Ajv, type Options as AjvOptions, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import { HttpError, defaultCode, envelope, validationError } from './errors.ts';
import {
  SECURITY_SCHEMES,
  openApiDocument,
  setDocumentAddress,
  transformRouteSchema,
  type OpenApiDocument,
} from './openapi.ts';
import { JsonTooDeepError, MAX_BODY_NESTING, jsonSyntaxProblem, jsonTextDeeperThan, parseJsonBody } from './json.ts';

/** A service's Fastify instance: TypeBox schemas give validation, types and OpenAPI at once. */
export type ServiceApp = FastifyInstance<
  Server,
  IncomingMessage,
  ServerResponse,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

export const MiB = 1024 * 1024;

/** Where a service app leaves the matched route's pattern on the raw request (routePatternOf). */
const ROUTE_PATTERN = Symbol('stratus.routePattern');
type Stamped = IncomingMessage & { [ROUTE_PATTERN]?: string };

/**
 * The pattern of the route a service app matched for this request (`/v1/buckets/:bucket/files/*`),
 * never the raw path; undefined when no route matched (404, 405) or no app has seen it yet. The
 * gateway labels its metrics and access log with it once the response has closed.
 */
export function routePatternOf(req: IncomingMessage): string | undefined {
  return (req as Stamped)[ROUTE_PATTERN];
}

/**
 * Every route stamps its pattern on the raw request before anything else runs for it (so a 400 or
 * 413 is labelled too), through a hook of its own that holds the pattern: reading
 * `request.routeOptions` would build an object on every request.
 */
function installRoutePatternStamp(app: ServiceApp): void {
  app.addHook('onRoute', (route) => {
    const url = route.url;
    const stamp = (request: FastifyRequest, _reply: FastifyReply, done: () => void): void => {
      (request.raw as Stamped)[ROUTE_PATTERN] = url;
      done();
    };
    const own = route.onRequest;
    route.onRequest = own === undefined ? [stamp] : [stamp, ...(Array.isArray(own) ? own : [own])];
  });
}

export interface ServiceAppOptions {
  /** Service name: OpenAPI title and log field. */
  name: string;
  /** OpenAPI title; `Stratus <name>` by default. */
  title?: string;
  /** The platform version, for the OpenAPI document. */
  version: string;
  description?: string;
  logger: FastifyBaseLogger;
  /** JSON body limit; 10 MiB by default (README.md: Input rules). */
  bodyLimit?: number;
  /**
   * Parse bodies as JSON whatever their Content-Type (the config and key services accept
   * `curl -d` bodies). When false only `application/json` and `+json` types are JSON.
   */
  jsonForAnyContentType?: boolean;
  /**
   * Parse every body (any Content-Type) with the exact JSON parser of `core/json.ts`: integers
   * beyond 2^53 stay exact (as bigint). Services that answer such values serialize them too.
   */
  exactJson?: boolean;
  /** The platform domain (DOMAIN), for the servers of the OpenAPI document; `localhost` by default. */
  domain?: string;
  /** Adds to the generated OpenAPI document what route schemas cannot say (core/openapi.ts, `openApiDocument`). */
  openapiExtend?: (document: OpenApiDocument) => void;
  /** Serve the generated OpenAPI document at this path (default `/openapi.json`; null = not served). */
  openapiPath?: string | null;
  /**
   * Consulted for a request no route matches (after the 405 check): it may answer it (a static
   * file, a single-page-app fallback) and return true; otherwise the 404 envelope goes out.
   */
  notFoundFallback?: (request: FastifyRequest, reply: FastifyReply) => Promise<boolean>;
}

// ajv-formats ships CommonJS with `exports.default`; under NodeNext the default import is the module.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv,
) => Ajv;

type Validator = ValidateFunction & ((data: unknown, context?: unknown) => boolean);

const DECIMAL_INTEGER = /^-?(0|[1-9][0-9]*)$/;
const DECIMAL_NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/;

/**
 * Query strings and path params arrive as text that Ajv coerces with `+text`, which also takes
 * `0x10`, `1e20`, `Infinity` and integers past 2^53. A numeric member must be written as a plain
 * decimal (and an integer must be a safe one); anything else is a 400 before Ajv sees it.
 */
function strictNumbers(schema: unknown, validate: ValidateFunction): ValidateFunction {
  const properties = (schema as { properties?: Record<string, { type?: unknown; items?: { type?: unknown } }> })
    .properties;
  if (!properties) return validate;
  const numeric: [string, 'integer' | 'number'][] = [];
  for (const [name, member] of Object.entries(properties)) {
    const type = member.type === 'array' ? member.items?.type : member.type;
    if (type === 'integer' || type === 'number') numeric.push([name, type]);
  }
  if (numeric.length === 0) return validate;
  const wrapped = ((data: unknown, context?: unknown) => {
    if (data !== null && typeof data === 'object') {
      for (const [name, type] of numeric) {
        const raw = (data as Record<string, unknown>)[name];
        for (const text of Array.isArray(raw) ? raw : [raw]) {
          if (typeof text !== 'string') continue;
          const ok =
            type === 'integer'
              ? DECIMAL_INTEGER.test(text) && Number.isSafeInteger(Number(text))
              : DECIMAL_NUMBER.test(text) && Number.isFinite(Number(text));
          if (ok) continue;
          wrapped.errors = [
            {
              keyword: 'type',
              instancePath: `/${name}`,
              schemaPath: '',
              params: { type },
              message:
                type === 'integer'
                  ? 'must be a decimal integer between -(2^53-1) and 2^53-1'
                  : 'must be a finite decimal number',
            },
          ];
          return false;
        }
      }
    }
    const valid = (validate as Validator)(data, context);
    wrapped.errors = validate.errors;
    return valid;
  }) as Validator;
  // Fastify passes the parent object (for coercion of a root value) when the validator has a schemaEnv.
  Object.assign(wrapped, { schemaEnv: (validate as { schemaEnv?: unknown }).schemaEnv, schema: validate.schema });
  return wrapped;
}

function makeAjv(options: AjvOptions): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: false, useDefaults: true, removeAdditional: false, ...options });
  addFormats(ajv);
  return ajv;
}

/**
 * Builds a service app with the platform's input rules (README.md: Input rules): unknown fields
 * and wrong types in bodies are 400s (no `removeAdditional`, no body coercion), JSON errors are
 * envelopes, a known path with another method is a real 405, params can be long, and every error
 * leaves as the envelope.
 */
export async function createServiceApp(options: ServiceAppOptions): Promise<ServiceApp> {
  const app = Fastify({
    loggerInstance: options.logger,
    // The gateway writes the access log; services do not log each request again.
    logController: new LogController({ disableRequestLogging: true }),
    // No per-request child logger (a measurable cost on every request): handlers log through the
    // service logger and name the request id themselves where it matters (the error handler does).
    childLoggerFactory: (logger) => logger,
    bodyLimit: options.bodyLimit ?? 10 * MiB,
    routerOptions: { maxParamLength: 8192 },
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    // Long uploads and streams are cut by idle timeouts at the listener, never by a request timeout.
    requestTimeout: 0,
    return503OnClosing: false,
    // Errors Fastify raises before routing leave as the envelope too. A path segment that is not
    // valid percent-encoding names no resource: 404.
    frameworkErrors: (error: FastifyError, _request: FastifyRequest, reply: FastifyReply) => {
      const status = error.code === 'FST_ERR_BAD_URL' ? 404 : error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 414 : 400;
      const code = status === 404 ? 'not_found' : status === 414 ? 'uri_too_long' : 'bad_request';
      void reply
        .code(status)
        .send(
          envelope(
            status,
            code,
            status === 404 ? 'no resource at this path (invalid percent-encoding)' : error.message,
          ),
        );
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // Bodies: exact types, no silent fixes. Query strings and params arrive as text and are coerced.
  const bodyAjv = makeAjv({ coerceTypes: false });
  const paramAjv = makeAjv({ coerceTypes: 'array' });
  app.setValidatorCompiler(({ schema, httpPart }) =>
    httpPart === 'body' ? bodyAjv.compile(schema) : strictNumbers(schema, paramAjv.compile(schema)),
  );
  app.setSchemaErrorFormatter((errors, dataVar) => {
    const first = errors[0];
    if (!first) return new Error(`${dataVar} is invalid`);
    const where = `${dataVar}${first.instancePath.replace(/\//g, '.')}`;
    if (first.keyword === 'additionalProperties') {
      return new Error(
        `${where} has an unknown field '${String((first.params as { additionalProperty?: string }).additionalProperty)}'`,
      );
    }
    return new Error(`${where} ${first.message ?? 'is invalid'}`);
  });

  if (options.exactJson) installExactJsonParser(app);
  else installJsonParser(app, options.jsonForAnyContentType ?? true);
  installRoutePatternStamp(app);
  installMethodNotAllowed(app, options.notFoundFallback);
  installErrorHandler(app);

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: options.title ?? `Stratus ${options.name}`,
        version: options.version,
        description: options.description,
        license: { name: 'Apache-2.0', url: 'https://www.apache.org/licenses/LICENSE-2.0' },
      },
      // Every scheme, so that routes may name any; documents keep the ones they use.
      components: { securitySchemes: structuredClone(SECURITY_SCHEMES) },
    },
    // Route annotations that only documents carry (core/openapi.ts, RouteDocs).
    transform: transformRouteSchema,
  });
  setDocumentAddress(app, { service: options.name, domain: options.domain ?? 'localhost' });
  const openapiPath = options.openapiPath === undefined ? '/openapi.json' : options.openapiPath;
  if (openapiPath) {
    app.get(openapiPath, { schema: { hide: true } }, async (request) =>
      openApiDocument(app, request, options.openapiExtend),
    );
  }
  return app;
}

/** A body nested past MAX_BODY_NESTING: refused before anything recursive sees it. */
const tooDeep = () => validationError(`request body is nested more than ${MAX_BODY_NESTING} levels deep`);

function installJsonParser(app: ServiceApp, anyContentType: boolean): void {
  const parse = (_req: FastifyRequest, body: string | Buffer, done: (err: Error | null, body?: unknown) => void) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim().length === 0) return done(null, undefined);
    if (jsonTextDeeperThan(text, MAX_BODY_NESTING)) return done(tooDeep());
    try {
      done(null, JSON.parse(text));
    } catch (error) {
      done(new HttpError(400, 'invalid_json', `request body is not valid JSON: ${jsonSyntaxProblem(error)}`));
    }
  };
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parse);
  app.addContentTypeParser(/^application\/[^;]*\+json/, { parseAs: 'string' }, parse);
  if (anyContentType) app.addContentTypeParser('*', { parseAs: 'string' }, parse);
}

function installExactJsonParser(app: ServiceApp): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, parseJsonBody(text));
    } catch (error) {
      done(
        error instanceof JsonTooDeepError
          ? tooDeep()
          : new HttpError(400, 'invalid_json', `request body is not valid JSON: ${jsonSyntaxProblem(error)}`),
      );
    }
  });
}

/** Answers 405 (with `Allow`) when the path exists under another method, 404 otherwise. */
function installMethodNotAllowed(app: ServiceApp, fallback: ServiceAppOptions['notFoundFallback']): void {
  const known = FindMyWay({ maxParamLength: 8192, ignoreTrailingSlash: false });
  const noop = () => {};
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      try {
        known.on(method as HTTPMethod, route.url, noop);
      } catch {
        // The same path and method registered twice with constraints: one entry is enough here.
      }
    }
  });
  app.setNotFoundHandler(async (request: FastifyRequest, reply: FastifyReply) => {
    const path = request.url.split('?')[0] ?? '/';
    const allowed = (['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const).filter(
      (m) => m !== request.method && known.find(m, path) !== null,
    );
    if (allowed.length > 0) {
      return reply
        .code(405)
        .header('allow', allowed.join(', '))
        .send(envelope(405, 'method_not_allowed', `method ${request.method} is not allowed on ${path}`));
    }
    if (fallback && (await fallback(request, reply))) return reply;
    return reply.code(404).send(envelope(404, 'not_found', `no route for ${request.method} ${path}`));
  });
}

function installErrorHandler(app: ServiceApp): void {
  app.setErrorHandler((error: FastifyError | HttpError, request: FastifyRequest, reply: FastifyReply) => {
    if (error instanceof HttpError) {
      void reply
        .code(error.status)
        .headers(error.headers)
        .send(envelope(error.status, error.code, error.message));
      return;
    }
    if ('validation' in error && error.validation) {
      void reply.code(400).send(envelope(400, 'validation_error', error.message));
      return;
    }
    switch (error.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        void reply.code(413).send(envelope(413, 'payload_too_large', 'request body is too large'));
        return;
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        void reply.code(415).send(envelope(415, 'unsupported_media_type', error.message));
        return;
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
        void reply.code(400).send(envelope(400, 'invalid_json', 'request body is not valid JSON'));
        return;
    }
    const status =
      typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500
        ? error.statusCode
        : 500;
    if (status === 500) {
      request.log.error(
        { err: error, reqId: request.id, method: request.method, url: request.url.split('?')[0] },
        'unhandled error',
      );
      void reply.code(500).send(envelope(500, 'internal_error', 'internal error'));
      return;
    }
    void reply.code(status).send(envelope(status, defaultCode(status), error.message));
  });
}
