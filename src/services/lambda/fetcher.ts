import { brotliDecompressSync, gunzipSync, inflateSync, type ZlibOptions } from 'node:zlib';
import { request, type Dispatcher } from 'undici';
import { EgressRefused, type EgressPolicy } from '../../core/egress.ts';

/**
 * The host side of a lambda's `fetch` (issue 22, item 1; README: Egress): one `InvocationFetcher`
 * per invocation performs its requests with undici, through the egress policy, within the
 * invocation's limits. What comes back is plain data, to be copied into the isolate.
 */

export interface FetchLimits {
  /** Requests per invocation, redirects included (default 50). */
  maxRequests: number;
  /** Requests in flight at once; more wait for a slot (default 8). */
  maxConcurrent: number;
  /** Bytes of response bodies per invocation, all together (default 10 MiB). */
  maxResponseBytes: number;
  /** Redirects followed per request, each hop checked again (default 5). */
  maxRedirects: number;
}

export const DEFAULT_FETCH_LIMITS: FetchLimits = {
  maxRequests: 50,
  maxConcurrent: 8,
  maxResponseBytes: 10 * 1024 * 1024,
  maxRedirects: 5,
};

export interface OutboundRequest {
  url: string;
  method: string;
  headers: readonly (readonly [string, string])[];
  body?: Uint8Array;
  /** `follow` (the default) or `manual`, as fetch's `redirect`; `error` refuses any redirect. */
  redirect?: 'follow' | 'manual' | 'error';
}

export interface InboundResponse {
  status: number;
  statusText: string;
  headers: [string, string][];
  /** The URL of the last hop. */
  url: string;
  redirected: boolean;
  body: Uint8Array;
}

/** Why a lambda's fetch failed, as the lambda sees it (a TypeError with this message, as fetch throws). */
export class FetchFailed extends Error {
  override readonly name = 'FetchFailed';
}

/** The content codings decoded for the lambda (RFC 9110, 8.4.1), as fetch decodes them. */
const DECODERS: Record<string, (body: Buffer, options: ZlibOptions) => Buffer> = {
  gzip: gunzipSync,
  'x-gzip': gunzipSync,
  deflate: inflateSync,
  br: brotliDecompressSync,
};
const USER_AGENT = 'Stratus-Lambda';

/** Why an invocation's requests were aborted: its time is up or it has ended. */
const ENDED = new FetchFailed("the invocation's time is up");

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** Request headers the host sets itself or that describe a connection, not a request. */
const DROPPED_HEADERS = new Set(['host', 'connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'te', 'trailer']);

/**
 * What one invocation may still spend on fetch and platform bindings together (README: Limits):
 * requests, requests at once, bytes of answers, and the wall-clock time left.
 */
export class InvocationBudget {
  private started = 0;
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];
  private received = 0;
  private aborter: AbortController | undefined;
  private timer: NodeJS.Timeout | undefined;
  private ended = false;
  /** When the invocation's wall-clock time runs out (Date.now() milliseconds); set by `start`. */
  private deadline = Infinity;

  constructor(readonly limits: FetchLimits = DEFAULT_FETCH_LIMITS) {}

  /** The invocation's clock starts (when it has its isolate): requests may run until `deadline`. */
  start(deadline: number): void {
    this.deadline = deadline;
  }

  /** Requests started so far (fetch hops and binding calls). */
  get requests(): number {
    return this.started;
  }

  /**
   * Counts one request, or throws FetchFailed when the invocation has used them all, its time is
   * up or it has ended (a call still on its way then never starts).
   */
  take(what: string): void {
    this.check(what);
    if (this.started >= this.limits.maxRequests)
      throw new FetchFailed(`at most ${this.limits.maxRequests} requests (fetch and bindings) per invocation`);
    this.started++;
  }

  /** Throws FetchFailed once the invocation's time is up or it has ended. */
  check(what: string): void {
    if (this.ended || Date.now() >= this.deadline) throw new FetchFailed(`${what}: the invocation's time is up`);
  }

  /** Bytes of answers still allowed. */
  get bytesLeft(): number {
    return this.limits.maxResponseBytes - this.received;
  }

  /** Counts bytes of an answer, or throws FetchFailed past the invocation's total. */
  receive(bytes: number, what: string): void {
    this.received += bytes;
    if (this.received > this.limits.maxResponseBytes)
      throw new FetchFailed(`${what}: response bodies over ${this.limits.maxResponseBytes} bytes in this invocation`);
  }

  /**
   * The signal every request of the invocation shares: it aborts when the invocation's time is up
   * or it has ended (`close`). FetchFailed when either has happened already.
   */
  signal(what: string): AbortSignal {
    this.check(what);
    if (this.aborter === undefined) {
      const aborter = new AbortController();
      this.aborter = aborter;
      this.timer = setTimeout(() => aborter.abort(ENDED), this.deadline - Date.now());
      this.timer.unref();
    }
    return this.aborter.signal;
  }

  /** The invocation has ended: nothing more starts, and what it still has in flight is aborted. */
  close(): void {
    this.ended = true;
    clearTimeout(this.timer);
    // One shared reason: aborting makes no error object per invocation.
    this.aborter?.abort(ENDED);
    for (const next of this.waiting.splice(0)) next();
  }

  /**
   * One of the requests that may be in flight at once, `release` gives it back: undefined when one
   * is free now (no promise on the common path), else a promise of the next one.
   */
  slot(): Promise<void> | undefined {
    if (this.inFlight < this.limits.maxConcurrent) {
      this.inFlight++;
      return undefined;
    }
    return new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  release(): void {
    if (this.ended) return;
    const next = this.waiting.shift();
    if (next) next();
    else this.inFlight--;
  }
}

export class InvocationFetcher {
  private hops = 0;

  constructor(
    private readonly policy: EgressPolicy,
    private readonly dispatcher: Dispatcher,
    private readonly budget: InvocationBudget,
  ) {}

  /** Requests this fetcher started, redirects included. */
  get requests(): number {
    return this.hops;
  }

  private get limits(): FetchLimits {
    return this.budget.limits;
  }

  async fetch(outbound: OutboundRequest): Promise<InboundResponse> {
    let url = this.parse(outbound.url);
    let method = outbound.method.toUpperCase();
    let headers = outbound.headers.filter(([name]) => !DROPPED_HEADERS.has(name.toLowerCase()));
    // What fetch sends unless the caller chose: the codings decoded below, and who is asking.
    if (!headers.some(([name]) => name.toLowerCase() === 'accept-encoding'))
      headers = [...headers, ['accept-encoding', 'gzip, deflate, br']];
    if (!headers.some(([name]) => name.toLowerCase() === 'user-agent'))
      headers = [...headers, ['user-agent', USER_AGENT]];
    let body = outbound.body;
    for (let hop = 0; ; hop++) {
      const response = await this.once(url, method, headers, body);
      const location = response.headers.find(([name]) => name === 'location')?.[1];
      if (!REDIRECTS.has(response.status) || location === undefined || outbound.redirect === 'manual')
        return { ...response, url: url.href, redirected: hop > 0 };
      if (outbound.redirect === 'error')
        throw new FetchFailed(`fetch to ${url.href} was redirected (redirect: "error")`);
      if (hop >= this.limits.maxRedirects)
        throw new FetchFailed(`fetch to ${outbound.url}: more than ${this.limits.maxRedirects} redirects`);
      const next = this.parse(new URL(location, url).href);
      // Fetch standard, HTTP-redirect fetch: 303 (and 301/302 after a POST) becomes a GET without a body.
      if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === 'POST')) {
        method = method === 'HEAD' ? 'HEAD' : 'GET';
        body = undefined;
        headers = headers.filter(([name]) => !/^content-/i.test(name));
      }
      // Credentials do not follow a redirect to another origin.
      if (next.origin !== url.origin) headers = headers.filter(([name]) => !/^(authorization|cookie)$/i.test(name));
      url = next;
    }
  }

  private parse(text: string): URL {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw new FetchFailed(`fetch: invalid URL ${JSON.stringify(text.slice(0, 200))}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new FetchFailed(`fetch: only http and https URLs are supported, not ${url.protocol}`);
    if (url.username !== '' || url.password !== '') throw new FetchFailed('fetch: URLs with credentials are refused');
    return url;
  }

  /** One hop: the limits, the policy, the request, and the body read within the byte budget. */
  private async once(
    url: URL,
    method: string,
    headers: readonly (readonly [string, string])[],
    body: Uint8Array | undefined,
  ): Promise<Omit<InboundResponse, 'url' | 'redirected'>> {
    this.budget.take(`fetch to ${url.host}`);
    this.hops++;
    const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
    // The port always, and a literal address here: net.connect never calls lookup for one.
    try {
      await this.policy.resolve(url.hostname, port);
    } catch (error) {
      if (error instanceof EgressRefused) throw new FetchFailed(error.message);
      throw new FetchFailed(`fetch to ${url.host}: ${(error as Error).message}`);
    }
    const wait = this.budget.slot();
    if (wait) await wait;
    try {
      const signal = this.budget.signal(`fetch to ${url.host}`);
      let answer: Dispatcher.ResponseData;
      try {
        answer = await request(url, {
          method: method as Dispatcher.HttpMethod,
          headers: headers.flat() as string[],
          body: body === undefined ? undefined : Buffer.from(body.buffer, body.byteOffset, body.byteLength),
          dispatcher: this.dispatcher,
          signal,
        });
      } catch (error) {
        throw this.failure(url, error, signal);
      }
      const chunks: Buffer[] = [];
      try {
        for await (const chunk of answer.body as AsyncIterable<Buffer>) {
          try {
            this.budget.receive(chunk.byteLength, `fetch to ${url.host}`);
          } catch (error) {
            answer.body.destroy();
            throw error;
          }
          chunks.push(chunk);
        }
      } catch (error) {
        throw error instanceof FetchFailed ? error : this.failure(url, error, signal);
      }
      let responseHeaders: [string, string][] = [];
      for (const [name, value] of Object.entries(answer.headers)) {
        if (value === undefined) continue;
        for (const one of Array.isArray(value) ? value : [value]) responseHeaders.push([name, one]);
      }
      let received: Buffer = Buffer.concat(chunks);
      // As fetch does: a compressed answer reaches the lambda decoded, without the headers that
      // described the encoded form.
      const coding = responseHeaders
        .find(([name]) => name === 'content-encoding')?.[1]
        .trim()
        .toLowerCase();
      const decode = coding === undefined || method === 'HEAD' ? undefined : DECODERS[coding];
      if (decode !== undefined && received.byteLength > 0) {
        try {
          const decoded = decode(received, {
            maxOutputLength: Math.max(1, this.budget.bytesLeft + received.byteLength),
          });
          this.budget.receive(decoded.byteLength - received.byteLength, `fetch to ${url.host}`);
          received = decoded;
        } catch (error) {
          if (error instanceof FetchFailed) throw error;
          const code = (error as { code?: unknown }).code;
          if (code === 'ERR_BUFFER_TOO_LARGE')
            throw new FetchFailed(
              `fetch to ${url.host}: response bodies over ${this.limits.maxResponseBytes} bytes in this invocation`,
            );
          throw new FetchFailed(`fetch to ${url.host}: the ${coding} body could not be decoded`);
        }
        responseHeaders = responseHeaders.filter(([name]) => name !== 'content-encoding' && name !== 'content-length');
      }
      return {
        status: answer.statusCode,
        statusText: answer.statusText ?? '',
        headers: responseHeaders,
        body: new Uint8Array(received.buffer, received.byteOffset, received.byteLength),
      };
    } finally {
      this.budget.release();
    }
  }

  private failure(url: URL, error: unknown, signal: AbortSignal): FetchFailed {
    if (error instanceof EgressRefused) return new FetchFailed(error.message);
    // undici wraps what lookup threw as the connection's cause.
    const cause = (error as { cause?: unknown }).cause;
    if (cause instanceof EgressRefused) return new FetchFailed(cause.message);
    if (signal.aborted) return new FetchFailed(`fetch to ${url.host}: the invocation's time is up`);
    return new FetchFailed(`fetch to ${url.host} failed: ${(error as Error).message}`);
  }
}
