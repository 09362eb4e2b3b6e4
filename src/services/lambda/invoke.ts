import type { FastifyReply, FastifyRequest } from 'fastify';
import { HttpError } from '../../core/errors.ts';
import { newId, rfc3339 } from '../../core/ids.ts';
import type { Lambda } from './repository.ts';
import type { InvokeResult, LambdaRequest, LambdaRuntime, LogLine } from './runtime/sandbox.ts';

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

/** What an owner's test invocation answers: the response the lambda made, and its console lines. */
export interface TestInvocation {
  status: number;
  headers: Record<string, string>;
  body: string;
  logs: LogLine[];
  duration_ms: number;
}

/** Runs a lambda for a request and writes the mapped response (lambda.md §4.2). */
export class Invoker {
  readonly ongoing = new Map<string, Ongoing>();

  constructor(private readonly runtime: LambdaRuntime, private readonly log: (entry: Record<string, unknown>) => void) {}

  /** One run, listed in /ongoing while it lasts; its console lines go to the server log. */
  private async execute(lambda: Lambda, req: LambdaRequest): Promise<InvokeResult> {
    const id = newId();
    this.ongoing.set(id, { id, owner: lambda.owner, lambda_id: lambda.id, lambda_name: lambda.name, started_at: rfc3339(), method: req.method, path: req.path });
    let result;
    try {
      result = await this.runtime.invoke(lambda.code, req);
    } finally {
      this.ongoing.delete(id);
    }
    if (result.logs.length > 0 || result.kind === 'error') {
      this.log({ invocation_id: id, lambda_id: lambda.id, outcome: result.kind === 'error' ? result.code : 'ok', logs: result.logs });
    }
    return result;
  }

  /**
   * An owner's test run (the console's Invoke): the same execution as a real request, answered
   * as data — status, headers, body text and the `console` lines the run wrote.
   */
  async test(lambda: Lambda, req: LambdaRequest): Promise<TestInvocation> {
    const started = performance.now();
    const type = STATIC_TYPES[lambda.language];
    if (type) return { status: 200, headers: { 'content-type': type }, body: lambda.code, logs: [], duration_ms: 0 };
    const result = await this.execute(lambda, req);
    const duration_ms = Math.round((performance.now() - started) * 100) / 100;
    switch (result.kind) {
      case 'json':
        return { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: result.json, logs: result.logs, duration_ms };
      case 'text':
        return { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: result.text, logs: result.logs, duration_ms };
      case 'response':
        return { status: result.status, headers: Object.fromEntries(result.headers.filter(([k]) => !FRAMING.has(k))), body: result.body, logs: result.logs, duration_ms };
      case 'error':
        return {
          status: 500,
          headers: { 'content-type': 'application/json; charset=utf-8' },
          body: JSON.stringify({ error: { status: 500, code: result.code, message: result.message } }),
          logs: result.logs,
          duration_ms,
        };
    }
  }

  async serve(lambda: Lambda, request: FastifyRequest, reply: FastifyReply, routePath: string, body: unknown): Promise<FastifyReply> {
    const type = STATIC_TYPES[lambda.language];
    if (type) return reply.code(200).type(type).send(lambda.code);
    const req: LambdaRequest = { method: request.method, path: routePath, query: queryOf(request.url), headers: headersOf(request), body };
    const result = await this.execute(lambda, req);
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
