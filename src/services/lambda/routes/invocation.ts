import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceApp } from '../../../core/app.ts';
import { HttpError, notFound, validationError } from '../../../core/errors.ts';
import { requireIdentity } from '../../../core/identity.ts';
import { MAX_BODY_NESTING, jsonTextDeeperThan } from '../../../core/json.ts';
import type { Invoker } from '../invoke.ts';
import { projectOf } from '../project.ts';
import type { LambdaRepository } from '../repository.ts';
import { errors } from '../schemas.ts';
import { Type } from 'typebox';

const BODY_LIMIT = 10 * 1024 * 1024;
const ANY = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

function isJsonType(contentType: string | undefined): boolean {
  const t = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return t === 'application/json' || t.endsWith('+json');
}

/** The mux route path: what follows `/mux/{owner}`, with a leading slash; never the query. */
function muxPath(url: string): string {
  const path = url.split('?')[0] ?? '/';
  const slash = path.indexOf('/', '/mux/'.length);
  const rest = slash < 0 ? '/' : path.slice(slash);
  try {
    return decodeURIComponent(rest);
  } catch {
    return rest;
  }
}

/** Reads and decodes a body for the project mux, which answers before Fastify parses bodies. */
async function readBody(request: FastifyRequest): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request.raw) {
    size += (chunk as Buffer).length;
    if (size > BODY_LIMIT) throw new HttpError(413, 'payload_too_large', 'request body is too large');
    chunks.push(chunk as Buffer);
  }
  return decodeBody(Buffer.concat(chunks).toString('utf8'), request.headers['content-type']);
}

function decodeBody(text: string, contentType: string | undefined): unknown {
  if (text.length === 0) return undefined;
  if (!isJsonType(contentType)) return text;
  if (jsonTextDeeperThan(text, MAX_BODY_NESTING)) throw validationError(`request body is nested more than ${MAX_BODY_NESTING} levels deep`);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new HttpError(400, 'invalid_json', `request body is not valid JSON: ${(err as Error).message}`);
  }
}

/** Invocation by id, through the owner mux, and on project hosts (lambda.md §5). */
export function registerInvocation(app: ServiceApp, repository: LambdaRepository, invoker: Invoker): void {
  // Invocation bodies: JSON types are parsed by the app's JSON parser (400 invalid_json); any
  // other type arrives as text, as the lambda's `req.body`.
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    done(null, text.length === 0 ? undefined : text);
  });

  const tags = ['invocation'];
  const response = errors(400, 404, 413, 429, 500);

  const byId = async (request: FastifyRequest, reply: FastifyReply, owner: string | null) => {
    const { lambda_id } = request.params as { lambda_id: string };
    const lambda = await repository.get(lambda_id);
    const project = projectOf(request);
    if (!lambda || (owner !== null && lambda.owner !== owner) || (project !== null && lambda.project_id !== project)) {
      throw notFound(`no lambda ${lambda_id}`);
    }
    return invoker.serve(lambda, request, reply, lambda.path, request.body);
  };

  const params = Type.Object({ lambda_id: Type.String() });

  app.post(
    '/api/v0/lambdas/:lambda_id/invoke',
    {
      schema: {
        tags,
        security: [{ gatewayIdentity: [] }],
        summary: "Test-run one of the caller's lambdas and get its response and console lines as data",
        description:
          'The console\'s Invoke: runs the lambda exactly as a request would (same limits, listed in /ongoing) with the given request, and answers the status, headers and body it produced together with the `console.log`/`warn`/`error` lines of that run. Defaults: the lambda\'s method and path, no query, no headers, no body.',
        params,
        body: Type.Object(
          {
            method: Type.Optional(Type.String({ minLength: 1, maxLength: 16 })),
            path: Type.Optional(Type.String({ pattern: '^/', maxLength: 2048 })),
            query: Type.Optional(Type.Record(Type.String(), Type.Union([Type.String(), Type.Array(Type.String())]))),
            headers: Type.Optional(Type.Record(Type.String(), Type.String())),
            body: Type.Optional(Type.Unknown({ description: 'the request body the lambda sees as req.body (JSON value or text)' })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            status: Type.Integer(),
            headers: Type.Record(Type.String(), Type.String()),
            body: Type.String(),
            logs: Type.Array(Type.Object({ level: Type.String(), message: Type.String() })),
            duration_ms: Type.Number(),
          }),
          ...errors(400, 401, 404, 429),
        },
      },
    },
    async (request) => {
      const owner = requireIdentity(request).user.id;
      const lambda = await repository.get(request.params.lambda_id);
      const project = projectOf(request);
      if (!lambda || lambda.owner !== owner || (project !== null && lambda.project_id !== project)) throw notFound(`no lambda ${request.params.lambda_id}`);
      const input = request.body;
      const headers = Object.fromEntries(Object.entries(input.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
      return invoker.test(lambda, { method: (input.method ?? (lambda.method === 'ANY' ? 'GET' : lambda.method)).toUpperCase(), path: input.path ?? lambda.path, query: input.query ?? {}, headers, body: input.body });
    },
  );

  app.route({
    method: [...ANY], url: '/api/v0/run/:lambda_id',
    schema: { tags, security: [{ gatewayIdentity: [] }], summary: "Run one of the caller's lambdas (any method)", params, response: { ...response, ...errors(401) } },
    handler: async (request, reply) => byId(request, reply, requireIdentity(request).user.id),
  });
  app.route({
    method: [...ANY], url: '/run/:lambda_id',
    schema: { tags, summary: 'Run a lambda publicly (any method)', params, response },
    handler: async (request, reply) => byId(request, reply, null),
  });

  const mux = async (request: FastifyRequest, reply: FastifyReply) => {
    const { owner_id } = request.params as { owner_id: string };
    const path = muxPath(request.url);
    const lambda = await repository.route({ owner: owner_id }, request.method, path);
    if (!lambda) throw notFound(`no lambda for ${request.method} ${path}`);
    return invoker.serve(lambda, request, reply, path, request.body);
  };
  const ownerParams = Type.Object({ owner_id: Type.String() });
  app.route({ method: [...ANY], url: '/mux/:owner_id', schema: { tags, summary: "Owner router (the route path '/')", params: ownerParams, response }, handler: mux });
  app.route({ method: [...ANY], url: '/mux/:owner_id/*', schema: { tags, summary: 'Owner router: owner, then method, then path', params: Type.Object({ owner_id: Type.String(), '*': Type.String() }), response }, handler: mux });

  // Project hosts: every path except /api/v0/… and /run/… is the project's mux, whatever routes
  // this app has (so /me or /mux/… on a project host are the project's paths too).
  app.addHook('onRequest', async (request, reply) => {
    const project = projectOf(request);
    if (project === null) return;
    const path = request.url.split('?')[0] ?? '/';
    if (path === '/api/v0' || path.startsWith('/api/v0/') || path.startsWith('/run/')) return;
    const body = await readBody(request);
    const lambda = await repository.route({ projectId: project }, request.method, path);
    if (!lambda) throw notFound(`no lambda for ${request.method} ${path}`);
    return invoker.serve(lambda, request, reply, path, body);
  });
}
