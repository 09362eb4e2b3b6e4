import type { FastifyRequest } from 'fastify';
import type { ServiceApp } from '../../../../core/app.ts';
import { MAX_BODY_NESTING, jsonSyntaxProblem, jsonTextDeeperThan } from '../../../../core/json.ts';
import { LambdaErrors } from '../../errors.ts';

/** The body limit of the project mux, as the app's own (10 MiB). */
const BODY_LIMIT = 10 * 1024 * 1024;

function isJsonType(contentType: string | undefined): boolean {
  const t = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return t === 'application/json' || t.endsWith('+json');
}

const JSON_SUFFIX_TYPE = /^application\/[^;]*\+json/;

/**
 * JSON bodies (application/json and +json types) of every route, read as the shared app reads
 * them except that a syntax error never quotes the body: V8's message repeats a stretch of the
 * text around the error, and a create or patch carries secrets (README: Environment and secrets).
 */
export function registerJsonBodies(app: ServiceApp): void {
  const parse = (_req: FastifyRequest, body: string | Buffer, done: (err: Error | null, body?: unknown) => void) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim().length === 0) return done(null, undefined);
    try {
      done(null, decodeJson(text));
    } catch (err) {
      done(err as Error);
    }
  };
  app.removeContentTypeParser(['application/json', JSON_SUFFIX_TYPE]);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parse);
  app.addContentTypeParser(JSON_SUFFIX_TYPE, { parseAs: 'string' }, parse);
}

function decodeJson(text: string): unknown {
  if (jsonTextDeeperThan(text, MAX_BODY_NESTING)) throw LambdaErrors.bodyTooDeep(MAX_BODY_NESTING);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw LambdaErrors.invalidJson(jsonSyntaxProblem(err));
  }
}

/**
 * Invocation bodies (README: Invocation): JSON types are parsed as registerJsonBodies says (400
 * invalid_json); any other type arrives as text, as the lambda's `req.body`.
 */
export function registerInvocationBodies(app: ServiceApp): void {
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    done(null, text.length === 0 ? undefined : text);
  });
}

/** Reads and decodes a body for the project mux, which answers before Fastify parses bodies. */
export async function readBody(request: FastifyRequest): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request.raw) {
    size += (chunk as Buffer).length;
    if (size > BODY_LIMIT) throw LambdaErrors.bodyTooLarge();
    chunks.push(chunk as Buffer);
  }
  return decodeBody(Buffer.concat(chunks).toString('utf8'), request.headers['content-type']);
}

function decodeBody(text: string, contentType: string | undefined): unknown {
  if (text.length === 0) return undefined;
  if (!isJsonType(contentType)) return text;
  return decodeJson(text);
}
