import type { FastifyReply, FastifyRequest } from 'fastify';
import { requireIdentity, PROJECT_HEADER } from '../../../core/identity.ts';
import { stringifyJson, type JsonValue } from '../../../core/json.ts';

/** The caller's user id (401 without a usable identity). */
export function callerOf(request: FastifyRequest): string {
  return requireIdentity(request).user.id;
}

/** The request's project: X-Project-Id (set by the gateway), else the identity's project, else ''. */
export function projectOf(request: FastifyRequest): string {
  const header = request.headers[PROJECT_HEADER];
  if (typeof header === 'string' && header.length > 0) return header;
  return requireIdentity(request).project?.id ?? '';
}

/**
 * Sends a value as JSON written by core's `stringifyJson`, bypassing the serializer: nanosecond
 * timestamps are bigints above 2^53, written as their exact digits (the serializer cannot).
 */
export function sendJson(reply: FastifyReply, status: number, value: JsonValue): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(stringifyJson(value));
}

/** One header value (a repeated header counts as absent rather than guessing). */
export function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/**
 * An answer sent before the request body was read to its end (413, 404, 400, a failed upload)
 * closes the connection: the rest of the body must not be read as the next request.
 */
export function closeIfBodyUnread(request: FastifyRequest, reply: FastifyReply): void {
  const hasBody =
    request.headers['transfer-encoding'] !== undefined || Number(request.headers['content-length'] ?? 0) > 0;
  if (hasBody && !request.raw.readableEnded) reply.header('connection', 'close');
}
