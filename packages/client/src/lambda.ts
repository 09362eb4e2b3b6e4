import { segment, slashPath, type CallOptions, type RequestBody, type Transport } from './transport.ts';
import type { BodyOf, QueryOf, ResultOf, Schemas } from './types.ts';

export type Lambda = Schemas['Lambda'];
export type NewLambda = BodyOf<'lambdaCreateLambda'>;
export type LambdaChange = BodyOf<'lambdaUpdateLambda'>;
export type TestRun = BodyOf<'lambdaTestLambda'>;
export type TestRunResult = Schemas['TestInvocationResult'];
export type LambdaInvocation = Schemas['LambdaInvocation'];
export type InvocationsQuery = QueryOf<'lambdaListLambdaInvocations'>;

export interface RunOptions extends CallOptions {
  method?: string;
  /** A path after the lambda's id, for lambdas that route on it. */
  path?: string;
  query?: Record<string, string | readonly string[]>;
  headers?: Record<string, string>;
  body?: RequestBody;
}

/** Lambdas (`/services/lambda`): JavaScript functions the platform runs. */
export class LambdaApi {
  constructor(private readonly transport: Transport) {}

  /** Deploys a new lambda. */
  create(lambda: NewLambda, options: CallOptions = {}): Promise<Lambda> {
    return this.transport.json({
      method: 'POST',
      service: 'lambda',
      path: '/api/v0/lambdas',
      json: lambda,
      ...options,
    });
  }

  /** The caller's lambdas in creation order. */
  list(options: CallOptions = {}): Promise<Lambda[]> {
    return this.transport.json({ method: 'GET', service: 'lambda', path: '/api/v0/lambdas', ...options });
  }

  get(id: string, options: CallOptions = {}): Promise<Lambda> {
    return this.transport.json({
      method: 'GET',
      service: 'lambda',
      path: `/api/v0/lambdas/${segment(id)}`,
      ...options,
    });
  }

  /** Deploys a change (new code, name, route). */
  update(id: string, change: LambdaChange, options: CallOptions = {}): Promise<Lambda> {
    return this.transport.json({
      method: 'PATCH',
      service: 'lambda',
      path: `/api/v0/lambdas/${segment(id)}`,
      json: change,
      ...options,
    });
  }

  delete(id: string, options: CallOptions = {}): Promise<ResultOf<'lambdaDeleteLambda', 200>> {
    return this.transport.json({
      method: 'DELETE',
      service: 'lambda',
      path: `/api/v0/lambdas/${segment(id)}`,
      ...options,
    });
  }

  /** A test run: the lambda's answer, logs and timing, as the console shows them. */
  invoke(id: string, request: TestRun = {}, options: CallOptions = {}): Promise<TestRunResult> {
    return this.transport.json({
      method: 'POST',
      service: 'lambda',
      path: `/api/v0/lambdas/${segment(id)}/invoke`,
      json: request,
      ...options,
    });
  }

  /**
   * The lambda's recent invocations, newest first: status, error, console lines, trigger and
   * counts of each run (`limit` 1 to the number the platform keeps, default 20).
   */
  async invocations(id: string, options: CallOptions & InvocationsQuery = {}): Promise<LambdaInvocation[]> {
    const list: ResultOf<'lambdaListLambdaInvocations', 200> = await this.transport.json({
      method: 'GET',
      service: 'lambda',
      path: `/api/v0/lambdas/${segment(id)}/invocations`,
      query: { limit: options.limit },
      signal: options.signal,
    });
    return list.invocations;
  }

  /** Runs one of the caller's lambdas as an HTTP request and answers its raw Response. */
  run(id: string, options: RunOptions = {}): Promise<Response> {
    return this.transport.send({
      method: options.method ?? 'GET',
      service: 'lambda',
      path: `/api/v0/run/${segment(id)}${options.path ? `/${slashPath(options.path.replace(/^\/+/, ''))}` : ''}`,
      query: options.query,
      headers: options.headers,
      body: options.body,
      signal: options.signal,
    });
  }
}
