import { isUtf8 } from 'node:buffer';
import type { Dispatcher } from 'undici';
import type { ServiceName } from '../../config.ts';
import { isSafeServicePath, SERVICE_PATH_RULE, type ServiceCalls } from '../context.ts';
import type { EgressPolicy } from '../../core/egress.ts';
import { FetchFailed, InvocationBudget, InvocationFetcher, type FetchLimits, type OutboundRequest } from './fetcher.ts';
import type { HostAnswer, InvocationHost } from './runtime/sandbox.ts';

/**
 * The host side of one invocation's `fetch` and `ctx.platform` (README: Fetch, Bindings): what the
 * sandbox sends (prelude-web.ts) is checked here as untrusted input, then performed within the
 * invocation's one budget of requests, bytes and time. Bindings call the platform's services as
 * the lambda's owner, in the lambda's project, through the same authorization as any caller.
 */

/** The services a lambda reaches through `ctx.platform` (README: Bindings). */
export const BINDABLE_SERVICES: readonly ServiceName[] = ['docdb', 'files', 'config', 'logs', 'kv', 'scheduler'];

/** Whose calls the bindings make. */
export interface BindingCaller {
  owner: string;
  /** The lambda's project ('' for none). */
  projectId: string;
}

export interface BridgeOptions {
  policy: EgressPolicy;
  dispatcher: Dispatcher;
  limits: FetchLimits;
  /** The platform's services; absent when the lambda service runs alone (bindings then fail). */
  services?: ServiceCalls;
}

/** Content types whose UTF-8 bodies cross to the sandbox as strings (no decoding there). */
const TEXTUAL = /^(text\/|application\/([a-z0-9.+-]*\+)?(json|x-ndjson|jsonl|xml|javascript|x-www-form-urlencoded)\b)/i;

/** An answer's body for the sandbox: a string when it is UTF-8 text without a BOM, else a copy of its bytes. */
function bodyOf(bytes: Uint8Array, headers: readonly (readonly [string, string])[]): ArrayBuffer | string {
  const type = headers.find(([name]) => name === 'content-type')?.[1] ?? '';
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (TEXTUAL.test(type) && !(buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf) && isUtf8(buffer))
    return buffer.toString('utf8');
  const out = new ArrayBuffer(bytes.byteLength);
  new Uint8Array(out).set(bytes);
  return out;
}

/** A request body from the sandbox: text is sent as UTF-8. */
function requestBody(body: ArrayBuffer | string | undefined): Uint8Array | undefined {
  if (body === undefined) return undefined;
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : new Uint8Array(body);
}

/** Thrown to the lambda as a TypeError with this message (the prelude maps the prefix). */
function typeError(message: string): Error {
  return new Error(`TypeError: ${message}`);
}

function headerPairs(value: unknown, what: string): [string, string][] {
  if (!Array.isArray(value)) throw typeError(`${what}: malformed headers`);
  for (const pair of value as unknown[])
    if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string')
      throw typeError(`${what}: malformed headers`);
  return value as [string, string][];
}

function objectOf(meta: string, what: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(meta);
  } catch {
    throw typeError(`${what}: malformed request`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw typeError(`${what}: malformed request`);
  return parsed as Record<string, unknown>;
}

/** The path part, percent-decoded where it can be (as a router would match it). */
function decodedPathname(path: string): string {
  const pathname = path.split('?')[0] ?? '';
  try {
    return decodeURIComponent(pathname);
  } catch {
    return pathname;
  }
}

/** Makes the host of each invocation; one per lambda service. */
export class LambdaBridges {
  constructor(private readonly options: BridgeOptions) {}

  /** The host of one invocation (its clock starts when the runtime calls `start`). */
  open(caller: BindingCaller): InvocationBridge {
    const budget = new InvocationBudget(this.options.limits);
    return new InvocationBridge(
      new InvocationFetcher(this.options.policy, this.options.dispatcher, budget),
      budget,
      caller,
      this.options.services,
    );
  }
}

export class InvocationBridge implements InvocationHost {
  /** Binding calls made (each also counts against the budget's requests). */
  bindings = 0;

  constructor(
    private readonly fetcher: InvocationFetcher,
    private readonly budget: InvocationBudget,
    private readonly caller: BindingCaller,
    private readonly services: ServiceCalls | undefined,
  ) {}

  /** The run has its isolate: its requests may run until `deadline` (Date.now() milliseconds). */
  start(deadline: number): void {
    this.budget.start(deadline);
  }

  /** The invocation has ended: nothing more starts, and its requests still in flight are aborted. */
  close(): void {
    this.budget.close();
  }

  /** Fetch requests made, redirect hops included. */
  get fetches(): number {
    return this.fetcher.requests;
  }

  call(op: string, meta: string, body: ArrayBuffer | string | undefined): Promise<HostAnswer> {
    if (op === 'fetch') return this.fetch(meta, body);
    if (op === 'platform') return this.platform(meta, body);
    return Promise.reject(typeError(`unknown host call ${JSON.stringify(op.slice(0, 40))}`));
  }

  private async fetch(meta: string, body: ArrayBuffer | string | undefined): Promise<HostAnswer> {
    const m = objectOf(meta, 'fetch');
    if (typeof m.url !== 'string' || typeof m.method !== 'string') throw typeError('fetch: malformed request');
    const redirect = m.redirect === 'manual' || m.redirect === 'error' ? m.redirect : 'follow';
    const outbound: OutboundRequest = {
      url: m.url,
      method: m.method,
      headers: headerPairs(m.headers, 'fetch'),
      body: requestBody(body),
      redirect,
    };
    try {
      const answer = await this.fetcher.fetch(outbound);
      const { status, statusText, headers, url, redirected } = answer;
      return [JSON.stringify({ status, statusText, headers, url, redirected }), bodyOf(answer.body, headers)];
    } catch (error) {
      if (error instanceof FetchFailed) throw typeError(error.message);
      throw typeError(`fetch to ${m.url.slice(0, 200)} failed`);
    }
  }

  private async platform(meta: string, body: ArrayBuffer | string | undefined): Promise<HostAnswer> {
    const m = objectOf(meta, 'platform.request');
    const { service, method, path } = m;
    if (typeof service !== 'string' || typeof method !== 'string' || typeof path !== 'string')
      throw typeError('platform.request: malformed request');
    if (!(BINDABLE_SERVICES as readonly string[]).includes(service))
      throw typeError(
        `platform.request: no service ${JSON.stringify(service.slice(0, 40))} (bindings reach ${BINDABLE_SERVICES.join(', ')})`,
      );
    // The rule the service calls enforce, checked here so a bad path costs nothing of the budget.
    if (!isSafeServicePath(path)) throw typeError(`platform.request: ${SERVICE_PATH_RULE}`);
    // The key-value replication feed carries every tenant: the gateway serves it on the internal
    // port only, and so no binding reaches it either (kv README: The replication feed).
    if (service === 'kv' && /^\/v1\/replicate(?:\/|$)/i.test(decodedPathname(path)))
      throw typeError('platform.request: the key-value replication feed is not open to lambdas');
    const headers = Object.fromEntries(headerPairs(m.headers, 'platform.request'));
    const services = this.services;
    if (services === undefined) throw typeError(`platform.request: the ${service} service cannot be reached from here`);
    const name = service as ServiceName;
    const what = `platform.request ${service} ${method} ${path.slice(0, 200)}`;
    try {
      this.budget.take(what);
    } catch (error) {
      throw typeError((error as Error).message);
    }
    this.bindings++;
    const wait = this.budget.slot();
    if (wait) await wait;
    try {
      const { owner, projectId } = this.caller;
      const answer = await services.call(name, {
        method,
        path,
        headers,
        body: requestBody(body),
        identity: { user: { id: owner } },
        // The key-value node keeps tenants apart by project; a lambda outside a project uses its
        // owner's own namespace, as the owner does through the gateway (kv README: Tenants).
        project: projectId !== '' ? projectId : name === 'kv' ? owner : undefined,
        signal: this.budget.signal(what),
        // Counted as it arrives, so calls in flight together share the invocation's bytes.
        onBytes: (bytes) => this.budget.receive(bytes, what),
      });
      const response = { status: answer.status, statusText: '', headers: answer.headers, url: '', redirected: false };
      return [JSON.stringify(response), bodyOf(answer.body, answer.headers)];
    } catch (error) {
      if (error instanceof FetchFailed) throw typeError(error.message);
      throw typeError(`${what} failed: ${(error as Error).message}`);
    } finally {
      this.budget.release();
    }
  }
}
