import type { FastifyReply, FastifyRequest } from 'fastify';
import { HttpError } from '../../core/errors.ts';
import { newId, rfc3339 } from '../../core/ids.ts';
import type { Lambda } from './repository.ts';
import type { LambdaRequest, LambdaRuntime } from './runtime/sandbox.ts';

export interface Ongoing {
  id: string;
  owner: string;
  lambda_id: string;
  lambda_name: string;
  started_at: string;
  method: string;
  path: string;
}

const STATIC_TYPES: Record<string, string> = {
  'static-html': 'text/html; charset=utf-8',
  'static-css': 'text/css; charset=utf-8',
  'static-js': 'text/javascript; charset=utf-8',
};

// Headers a Response from a lambda may not set: the server frames the body itself.
const FRAMING = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade']);

/** Query parameters: a repeated name becomes an array of strings, a single one a string. */
export function queryOf(url: string): Record<string, string | string[]> {
  const i = url.indexOf('?');
  const out: Record<string, string | string[]> = {};
  if (i < 0) return out;
  for (const [k, v] of new URLSearchParams(url.slice(i + 1))) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

/** Headers with lower-case keys; a repeated header is joined with ", " (set-cookie included). */
export function headersOf(request: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(request.headers)) {
    if (v === undefined) continue;
    out[k] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

/** Runs a lambda for a request and writes the mapped response (lambda.md §4.2). */
export class Invoker {
  readonly ongoing = new Map<string, Ongoing>();

  constructor(private readonly runtime: LambdaRuntime, private readonly log: (entry: Record<string, unknown>) => void) {}

  async serve(lambda: Lambda, request: FastifyRequest, reply: FastifyReply, routePath: string, body: unknown): Promise<FastifyReply> {
    const type = STATIC_TYPES[lambda.language];
    if (type) return reply.code(200).type(type).send(lambda.code);
    const req: LambdaRequest = { method: request.method, path: routePath, query: queryOf(request.url), headers: headersOf(request), body };
    const id = newId();
    this.ongoing.set(id, { id, owner: lambda.owner, lambda_id: lambda.id, lambda_name: lambda.name, started_at: rfc3339(), method: request.method, path: routePath });
    let result;
    try {
      result = await this.runtime.invoke(lambda.code, req);
    } finally {
      this.ongoing.delete(id);
    }
    if (result.logs.length > 0 || result.kind === 'error') {
      this.log({ invocation_id: id, lambda_id: lambda.id, outcome: result.kind === 'error' ? result.code : 'ok', logs: result.logs });
    }
    switch (result.kind) {
      case 'json':
        return reply.code(200).type('application/json; charset=utf-8').send(result.json);
      case 'text':
        return reply.code(200).type('text/plain; charset=utf-8').send(result.text);
      case 'response': {
        reply.code(result.status);
        for (const [k, v] of result.headers) if (!FRAMING.has(k)) reply.header(k, v);
        return reply.send(result.body);
      }
      case 'error':
        throw new HttpError(500, result.code, result.message);
    }
  }
}
