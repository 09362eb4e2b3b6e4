import type { FastifyReply, FastifyRequest } from 'fastify';
import { newId, rfc3339 } from '../../core/ids.ts';
import type { CronTrigger, PlatformTrigger } from '../../core/trigger.ts';
import type { LambdaBridges } from './bridge.ts';
import { LambdaErrors } from './errors.ts';
import { OwnerLimiter } from './fairness.ts';
import type { InvocationRecorder, InvocationTrigger } from './history.ts';
import type { ConsoleLineSink } from './logger-ingest.ts';
import { allowedHeaders, isProjectHost, securityHeaders, visitorHeaders } from './output.ts';
import { projectOf } from './project.ts';
import type { OngoingInvocations } from './ongoing.ts';
import type { Lambda } from './repository.ts';
import type { PlatformMetrics } from '../../metrics/index.ts';
import { maskSecrets } from './masking.ts';
import type { InvokeResult, LambdaRequest, LambdaRuntime, LogLine } from './runtime/sandbox.ts';

export interface InvokerOptions {
  /** The platform domain (settings.domain): decides platform hosts from project hosts. */
  domain: string;
  /** Invocations of one owner's lambdas that run at once (settings.lambdaOwnerConcurrency). */
  ownerConcurrency: number;
  /** The host of each invocation's fetch and bindings; without it they fail inside the lambda. */
  bridges?: LambdaBridges;
  /** A lambda's env and its secrets (decrypted); without it both are empty. */
  envOf?: (lambda: Lambda) => Promise<LambdaEnv>;
}

/** What `ctx.env` is made of: the env and the secrets, kept apart so secret values can be masked. */
export interface LambdaEnv {
  env: Record<string, string>;
  secrets: Record<string, string>;
  /** Changes whenever env or secrets do: part of the warm module context's key. */
  version?: string;
}

/** Where finished invocations go besides the server log (README: Invocation history and logs). */
export interface InvocationOutputs {
  /** Every invocation's record: the lambda's history (history.ts). */
  history?: InvocationRecorder;
  /** The console lines of a lambda that names a logger, ingested into it (logger-ingest.ts). */
  loggers?: ConsoleLineSink;
  /** Counts every run by trigger and outcome, with its duration (README.md: Metrics). */
  metrics?: Pick<PlatformMetrics, 'invocation'>;
}

/** What a run answered: 200 for JSON or text, a Response's own status, 500 for an error. */
function statusOf(result: InvokeResult): number {
  return result.kind === 'response' ? result.status : result.kind === 'error' ? 500 : 200;
}

let stampSecond = -1;
let stamp = '';

/** rfc3339() of now: second precision, so made once a second rather than once a run. */
function startedAt(): string {
  const second = Math.floor(Date.now() / 1000);
  if (second !== stampSecond) {
    stampSecond = second;
    stamp = rfc3339(new Date(second * 1000));
  }
  return stamp;
}

/** Milliseconds since `started` (a performance.now() reading), to a hundredth. */
function elapsedMs(started: number): number {
  return Math.round((performance.now() - started) * 100) / 100;
}

const STATIC_TYPES: Record<string, string> = {
  'static-html': 'text/html; charset=utf-8',
  'static-css': 'text/css; charset=utf-8',
  'static-js': 'text/javascript; charset=utf-8',
};

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

/** What an owner's test invocation answers: the response the lambda made, and its console lines. */
export interface TestInvocation {
  status: number;
  headers: Record<string, string>;
  body: string;
  logs: LogLine[];
  duration_ms: number;
}

/** Runs a lambda for a request and writes the mapped response (README: Invocation, Output rules). */
export class Invoker {
  private readonly limiter: OwnerLimiter;

  /**
   * `ongoing`: the running invocations, listed by `/ongoing` on every instance (ongoing.ts);
   * `outputs`: the history every finished invocation is recorded in, and the loggers console
   * lines go to.
   */
  constructor(
    private readonly runtime: LambdaRuntime,
    private readonly log: (entry: Record<string, unknown>) => void,
    private readonly options: InvokerOptions,
    readonly ongoing: OngoingInvocations,
    private readonly outputs: InvocationOutputs = {},
  ) {
    this.limiter = new OwnerLimiter(options.ownerConcurrency);
  }

  /**
   * One run within its owner's share of the pool, listed in /ongoing while it runs; its console
   * lines go to the server log. Module state is kept per lambda id (and code version). Once it
   * has ended it is recorded in the lambda's history, and its console lines go to the lambda's
   * logger if it names one — both off the request path (README: Invocation history and logs).
   */
  private async execute(
    lambda: Lambda,
    req: LambdaRequest,
    trigger: InvocationTrigger,
    triggerData?: PlatformTrigger,
  ): Promise<InvokeResult> {
    // Most runs get their slot at once: no await (and no turn of the microtask queue) for them.
    const slot = this.limiter.acquire(lambda.owner);
    if (slot) await slot;
    const id = newId();
    const started_at = startedAt();
    const started = performance.now();
    let result: InvokeResult;
    const counts = { fetches: 0, bindings: 0 };
    try {
      this.ongoing.start({
        id,
        owner: lambda.owner,
        lambda_id: lambda.id,
        lambda_name: lambda.name,
        started_at,
        method: req.method,
        path: req.path,
      });
      result = await this.run(lambda, req, id, counts, triggerData ?? { type: trigger });
    } finally {
      this.ongoing.end(id);
      this.limiter.release(lambda.owner);
    }
    if (result.logs.length > 0 || result.kind === 'error') {
      this.log({
        invocation_id: id,
        lambda_id: lambda.id,
        outcome: result.kind === 'error' ? result.code : 'ok',
        logs: result.logs,
      });
    }
    const duration = elapsedMs(started);
    this.outputs.metrics?.invocation(trigger, result.kind === 'error' ? result.code : null, duration / 1000);
    this.recorded(lambda, id, started_at, duration, trigger, result, counts);
    return result;
  }

  /** The run itself, with its env, secrets and host; `counts` gets its fetches and binding calls. */
  private async run(
    lambda: Lambda,
    req: LambdaRequest,
    id: string,
    counts: { fetches: number; bindings: number },
    trigger: PlatformTrigger | { type: InvocationTrigger },
  ): Promise<InvokeResult> {
    let parts: LambdaEnv;
    try {
      parts = this.options.envOf ? await this.options.envOf(lambda) : { env: {}, secrets: {} };
    } catch (error) {
      // Secrets this instance cannot open (another key): the run fails with the reason.
      return { kind: 'error', code: 'lambda_error', message: (error as Error).message, logs: [] };
    }
    const { env, secrets, version } = parts;
    const host = this.options.bridges?.open({ owner: lambda.owner, projectId: lambda.project_id });
    let result: InvokeResult;
    try {
      result = await this.runtime.invoke(lambda.code, req, {
        // Module state lives on between runs only while env and secrets stay as they were.
        contextKey: version === undefined ? lambda.id : `${lambda.id}\u0000${version}`,
        host,
        ctx: {
          invocation_id: id,
          lambda: { id: lambda.id, name: lambda.name },
          env: { ...env, ...secrets },
          trigger: { ...trigger },
        },
      });
    } finally {
      host?.close();
    }
    if (host) {
      counts.fetches = host.fetches;
      counts.bindings = host.bindings;
    }
    return maskSecrets(result, secrets);
  }

  /** Hands a finished run to the history and, when its lambda names a logger, its lines to the logger. */
  private recorded(
    lambda: Lambda,
    id: string,
    started_at: string,
    duration_ms: number,
    trigger: InvocationTrigger,
    result: InvokeResult,
    { fetches, bindings }: { fetches: number; bindings: number },
  ): void {
    this.outputs.history?.record({
      id,
      lambda_id: lambda.id,
      owner: lambda.owner,
      started_at,
      duration_ms,
      trigger,
      status: statusOf(result),
      error_code: result.kind === 'error' ? result.code : null,
      error_message: result.kind === 'error' ? result.message : null,
      logs: result.logs,
      fetches,
      bindings,
    });
    const loggerId = lambda.logger_id;
    if (typeof loggerId === 'string' && loggerId !== '' && result.logs.length > 0)
      this.outputs.loggers?.send({
        invocationId: id,
        lambdaId: lambda.id,
        owner: lambda.owner,
        loggerId,
        logs: result.logs,
      });
  }

  /**
   * A tick of the lambda's schedule (cron.ts): the run of a `POST` to its own path with no query,
   * headers or body, `ctx.trigger` the tick. Like any run it waits for its owner's share of the
   * pool (throwing 429's error when that is full), is listed in /ongoing, recorded in the history
   * as `cron`, and its console lines go to the server log and the lambda's logger. Static lambdas
   * run no code.
   */
  async runCron(lambda: Lambda, trigger: CronTrigger): Promise<InvokeResult | null> {
    if (STATIC_TYPES[lambda.language]) return null;
    const req: LambdaRequest = { method: 'POST', path: lambda.path, query: {}, headers: {}, body: null };
    return this.execute(lambda, req, 'cron', trigger);
  }

  /**
   * An owner's test run (the console's Invoke): the same execution as a real request, answered
   * as data — status, headers (as a project host would send them) and body text, and the
   * `console` lines the run wrote.
   */
  async test(lambda: Lambda, req: LambdaRequest): Promise<TestInvocation> {
    const started = performance.now();
    const type = STATIC_TYPES[lambda.language];
    if (type) return { status: 200, headers: { 'content-type': type }, body: lambda.code, logs: [], duration_ms: 0 };
    const result = await this.execute(lambda, req, 'invoke');
    const duration_ms = elapsedMs(started);
    switch (result.kind) {
      case 'json':
        return {
          status: 200,
          headers: { 'content-type': 'application/json; charset=utf-8' },
          body: result.json,
          logs: result.logs,
          duration_ms,
        };
      case 'text':
        return {
          status: 200,
          headers: { 'content-type': 'text/plain; charset=utf-8' },
          body: result.text,
          logs: result.logs,
          duration_ms,
        };
      case 'response': {
        const headers: Record<string, string> = {};
        for (const [k, v] of allowedHeaders(result.headers, false))
          headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
        const body = typeof result.body === 'string' ? result.body : result.body.toString('latin1');
        return { status: result.status, headers, body, logs: result.logs, duration_ms };
      }
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

  /**
   * Serves a lambda's output for a request: `/run`, `/api/v0/run`, `/mux` and the project mux,
   * each naming itself as the `trigger` the history records, unless the platform itself started
   * the run (`triggerData`: a cron tick or a task, which are then `ctx.trigger` and the record's). Every answer carries nosniff, and on
   * a platform host the sandboxing CSP; a Response's headers pass allowedHeaders() first (output.ts).
   */
  async serve(
    lambda: Lambda,
    request: FastifyRequest,
    reply: FastifyReply,
    routePath: string,
    body: unknown,
    trigger: InvocationTrigger,
    triggerData?: PlatformTrigger,
  ): Promise<FastifyReply> {
    const platformHost = !isProjectHost(request.headers.host, this.options.domain, projectOf(request));
    const type = STATIC_TYPES[lambda.language];
    if (type) return reply.code(200).headers(securityHeaders(platformHost)).type(type).send(lambda.code);
    const req: LambdaRequest = {
      method: request.method,
      path: routePath,
      query: queryOf(request.url),
      headers: visitorHeaders(request),
      body,
    };
    const result = await this.execute(lambda, req, triggerData?.type ?? trigger, triggerData);
    switch (result.kind) {
      case 'json':
        return reply
          .code(200)
          .headers(securityHeaders(platformHost))
          .type('application/json; charset=utf-8')
          .send(result.json);
      case 'text':
        return reply
          .code(200)
          .headers(securityHeaders(platformHost))
          .type('text/plain; charset=utf-8')
          .send(result.text);
      case 'response': {
        const grouped = new Map<string, string[]>();
        for (const [k, v] of allowedHeaders(result.headers, platformHost))
          grouped.set(k, [...(grouped.get(k) ?? []), v]);
        reply.code(result.status);
        for (const [k, values] of grouped) reply.header(k, k === 'set-cookie' ? values : values.join(', '));
        return reply.headers(securityHeaders(platformHost)).send(result.body);
      }
      case 'error':
        throw LambdaErrors.lambdaFailed(result.code, result.message);
    }
  }
}
