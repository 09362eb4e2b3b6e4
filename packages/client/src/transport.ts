import { StratusError, errorFromResponse, isAbortError } from './errors.ts';
import { ndjsonValues, serverSentEvents, textLines, type ServerSentEvent } from './streams.ts';

/** How failed idempotent calls are retried. */
export interface RetryOptions {
  /** Most attempts in all, the first included (default 3; 1 turns retries off). */
  attempts?: number;
  /** The first backoff in milliseconds, doubled per attempt, with full jitter (default 200). */
  baseDelayMs?: number;
  /** The longest wait between attempts, a `Retry-After` included (default 10,000). */
  maxDelayMs?: number;
}

export interface ClientOptions {
  /** The platform's base URL, for example `http://localhost:8080`; services are under `<url>/services/<name>`. */
  url: string | URL;
  /** An API key, sent as `Api-Key` with `secret` as `Api-Secret` when there is no bearer token. */
  apiKey?: string;
  secret?: string;
  /** A bearer session token (from `auth.login`, which stores its own). */
  token?: string;
  /** A scheduler API key, sent as `X-API-Key` on scheduler calls. */
  schedulerKey?: string;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  retry?: RetryOptions;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
}

/** A query string's values; arrays repeat the parameter, `undefined` leaves it out. */
export type QueryValue = string | number | boolean | undefined | readonly string[];

/** The body types every runtime can send and, except streams, send again on a retry. */
export type RequestBody = string | Blob | ArrayBuffer | Uint8Array | ReadableStream<Uint8Array>;

export interface CallOptions {
  /** Cancels the call (and, for streams, the stream). */
  signal?: AbortSignal;
}

export interface TransportRequest extends CallOptions {
  method: string;
  service: string;
  /** The path under the service, already percent-encoded where it needs to be. */
  path: string;
  query?: Record<string, QueryValue>;
  /** A value sent as JSON. */
  json?: unknown;
  /** A raw body (not with `json`). */
  body?: RequestBody;
  headers?: Record<string, string>;
  /** Credentials for this call instead of the client's (`null`: none). */
  credentials?: Record<string, string> | null;
}

const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);
const RETRIED_STATUSES = new Set([429, 502, 503, 504]);
/**
 * Error codes of those statuses that are a service's verdict, not a passing failure: a run
 * driver that could not apply a change (502 `driver_error`) fails again the same way, after
 * waiting as long, so it is not sent again.
 */
const FINAL_CODES = new Set(['driver_error']);

/** Percent-encodes one path segment (a `/` inside it included). */
export function segment(value: string): string {
  return encodeURIComponent(value);
}

/** Percent-encodes each segment of a slash-separated path, keeping the slashes. */
export function slashPath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

/**
 * The HTTP layer every namespace shares: URLs under `/services/<name>`, credentials, JSON bodies,
 * error envelopes as StratusError, retries of idempotent calls, and streamed answers.
 */
export class Transport {
  readonly baseUrl: string;
  token: string | undefined;
  readonly apiKey: string | undefined;
  readonly secret: string | undefined;
  readonly schedulerKey: string | undefined;
  private readonly headers: Record<string, string>;
  private readonly retry: Required<RetryOptions>;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions) {
    // Trailing slashes go, so `<url>/services/…` never has `//`.
    this.baseUrl = String(options.url).replace(/\/+$/, '');
    this.token = options.token;
    this.apiKey = options.apiKey;
    this.secret = options.secret;
    this.schedulerKey = options.schedulerKey;
    this.headers = { ...options.headers };
    this.retry = {
      attempts: Math.max(1, options.retry?.attempts ?? 3),
      baseDelayMs: options.retry?.baseDelayMs ?? 200,
      maxDelayMs: options.retry?.maxDelayMs ?? 10_000,
    };
    // Bound to globalThis: browsers throw "Illegal invocation" for a detached fetch.
    this.fetchImpl = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  /** `<url>/services/<service><path>?<query>`. */
  url(service: string, path: string, query?: Record<string, QueryValue>): string {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value === undefined) continue;
      if (typeof value === 'object') for (const item of value) search.append(name, item);
      else search.append(name, String(value));
    }
    const text = search.toString();
    return `${this.baseUrl}/services/${service}${path}${text ? `?${text}` : ''}`;
  }

  /** The client's credential headers: the bearer token when there is one, else the API key pair. */
  credentialHeaders(): Record<string, string> {
    if (this.token !== undefined) return { authorization: `Bearer ${this.token}` };
    if (this.apiKey !== undefined) return { 'api-key': this.apiKey, 'api-secret': this.secret ?? '' };
    return {};
  }

  /** The response of a successful call (2xx or 304); any other status is thrown as a StratusError. */
  async send(request: TransportRequest): Promise<Response> {
    const method = request.method.toUpperCase();
    const headers: Record<string, string> = {
      ...this.headers,
      ...(request.credentials === undefined ? this.credentialHeaders() : (request.credentials ?? {})),
      ...request.headers,
    };
    let body: RequestBody | undefined = request.body;
    if (request.json !== undefined) {
      body = JSON.stringify(request.json);
      headers['content-type'] ??= 'application/json';
    }
    const streamed = typeof ReadableStream !== 'undefined' && body instanceof ReadableStream;
    // A stream cannot be sent twice, and POST/PATCH may have taken effect before a failure.
    const attempts = IDEMPOTENT_METHODS.has(method) && !streamed ? this.retry.attempts : 1;
    const url = this.url(request.service, request.path, request.query);

    for (let attempt = 1; ; attempt++) {
      let response: Response;
      try {
        // Cast: TypeScript's DOM types want a Uint8Array over an ArrayBuffer; every runtime takes any view.
        const init: RequestInit & { duplex?: 'half' } = {
          method,
          headers,
          body: body as RequestInit['body'],
          signal: request.signal,
        };
        // Node's fetch sends a stream body only when told the request is half duplex.
        if (streamed) init.duplex = 'half';
        response = await this.fetchImpl(url, init);
      } catch (error) {
        if (isAbortError(error) || request.signal?.aborted) throw error;
        if (attempt >= attempts) {
          throw new StratusError(0, 'network_error', `${method} ${url}: ${describe(error)}`, { cause: error });
        }
        await sleep(this.backoff(attempt), request.signal);
        continue;
      }
      if (response.ok || response.status === 304) return response;
      if (attempt < attempts && RETRIED_STATUSES.has(response.status) && !(await hasFinalCode(response))) {
        const wait = retryAfterMs(response.headers.get('retry-after')) ?? this.backoff(attempt);
        await response.body?.cancel().catch(() => undefined);
        await sleep(Math.min(wait, this.retry.maxDelayMs), request.signal);
        continue;
      }
      throw await errorFromResponse(response);
    }
  }

  /** The parsed JSON answer; `undefined` for an answer without a body (204). */
  async json<T>(request: TransportRequest): Promise<T> {
    const response = await this.send(request);
    try {
      const text = await response.text();
      return (text === '' ? undefined : JSON.parse(text)) as T;
    } catch (error) {
      throw readFailure(error, request, response);
    }
  }

  /** Sends the request and discards the answer's body. */
  async empty(request: TransportRequest): Promise<void> {
    const response = await this.send(request);
    await response.body?.cancel().catch(() => undefined);
  }

  /** An NDJSON answer as its values; leaving the loop or aborting the signal ends the request. */
  ndjson<T>(request: TransportRequest): AsyncGenerator<T, void, undefined> {
    return this.stream(request, (body, response) =>
      ndjsonValues<T>(body, response.status, response.headers.get('x-request-id') ?? undefined),
    );
  }

  /** A text answer as its lines (without `\n`). */
  lines(request: TransportRequest): AsyncGenerator<string, void, undefined> {
    return this.stream(request, (body) => textLines(body));
  }

  /** A `text/event-stream` answer as its messages. */
  events(request: TransportRequest): AsyncGenerator<ServerSentEvent, void, undefined> {
    return this.stream({ ...request, headers: { accept: 'text/event-stream', ...request.headers } }, (body) =>
      serverSentEvents(body),
    );
  }

  private async *stream<T>(
    request: TransportRequest,
    parse: (body: ReadableStream<Uint8Array>, response: Response) => AsyncGenerator<T, void, undefined>,
  ): AsyncGenerator<T, void, undefined> {
    // Our own controller, so leaving the loop early also ends the connection.
    const controller = new AbortController();
    const onAbort = () => controller.abort(request.signal?.reason);
    if (request.signal?.aborted) onAbort();
    request.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const response = await this.send({ ...request, signal: controller.signal });
      if (!response.body) return;
      try {
        yield* parse(response.body, response);
      } catch (error) {
        throw readFailure(error, request, response);
      }
    } finally {
      request.signal?.removeEventListener('abort', onAbort);
      controller.abort();
    }
  }

  private backoff(attempt: number): number {
    const ceiling = Math.min(this.retry.maxDelayMs, this.retry.baseDelayMs * 2 ** (attempt - 1));
    // Full jitter: clients that failed together do not all come back together.
    return Math.random() * ceiling;
  }
}

/**
 * An error while reading an answer's body as a StratusError: a cut connection is a
 * `network_error` (status 0), a body that is not the JSON it should be `invalid_response`. The
 * caller's abort and the platform's own errors pass through unchanged.
 */
function readFailure(error: unknown, request: TransportRequest, response: Response): unknown {
  if (error instanceof StratusError || isAbortError(error) || request.signal?.aborted) return error;
  const where = `${request.method.toUpperCase()} /services/${request.service}${request.path}`;
  const requestId = response.headers.get('x-request-id') ?? undefined;
  if (error instanceof SyntaxError)
    return new StratusError(response.status, 'invalid_response', `${where}: ${error.message}`, {
      requestId,
      cause: error,
    });
  return new StratusError(0, 'network_error', `${where}: the answer was cut: ${describe(error)}`, {
    requestId,
    cause: error,
  });
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
  }
  return String(error);
}

/** `Retry-After` as milliseconds: delta seconds or an HTTP date; null when absent or unreadable. */
/** Whether an error answer's envelope carries one of FINAL_CODES (read from a copy of it). */
async function hasFinalCode(response: Response): Promise<boolean> {
  if (!(response.headers.get('content-type') ?? '').includes('json')) return false;
  try {
    const body = (await response.clone().json()) as { error?: { code?: unknown } } | null;
    return typeof body?.error?.code === 'string' && FINAL_CODES.has(body.error.code);
  } catch {
    return false;
  }
}

function retryAfterMs(header: string | null): number | null {
  if (header === null) return null;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? null : Math.max(0, date - Date.now());
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
