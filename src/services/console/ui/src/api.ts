// Talking to the platform: the console's own config, one base URL per service host, the session
// token, error envelopes, and the mock API of demo mode.

export interface ConsoleConfig {
  demo: boolean;
  domain: string;
  providers: { name: string }[];
  /** Self sign-up is open (`SIGNUP=open`). */
  signup: boolean;
  version: string;
}

export type Service = 'auth' | 'api' | 'apikeys' | 'lambda' | 'scheduler' | 'docdb' | 'logs' | 'files' | 'config';

/** An error answer of a service (its `{"error":{…}}` envelope), or a failure to reach it. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

const TOKEN_KEY = 'stratus.console.token';
export const DEMO_UNAVAILABLE = 'Not available in demo mode.';
export const DEMO_READ_ONLY = 'Demo mode is read-only: changes are disabled.';
/** Fired on window when a call made with the session token is refused with 401 (the session may have ended). */
export const UNAUTHORIZED_EVENT = 'stratus:unauthorized';
let current: ConsoleConfig = {
  demo: false,
  domain: location.hostname.replace(/^console\./, ''),
  providers: [],
  signup: false,
  version: '',
};

export function config(): ConsoleConfig {
  return current;
}

export async function loadConfig(): Promise<ConsoleConfig> {
  // Relative: the page is at `/` on console.<domain> and at `/services/console/` on the front door.
  const res = await fetch('console-config.json', { headers: { accept: 'application/json' } });
  if (!res.ok) throw await errorOf(res);
  const body = (await res.json()) as Partial<ConsoleConfig>;
  current = {
    demo: body.demo === true,
    domain: typeof body.domain === 'string' && body.domain !== '' ? body.domain : current.domain,
    providers: Array.isArray(body.providers) ? body.providers.filter((p) => typeof p?.name === 'string') : [],
    signup: body.signup === true,
    version: typeof body.version === 'string' ? body.version : '',
  };
  return current;
}

/** The front door's prefix the console was loaded under (root README.md, One base URL), or null on its own host. */
const FRONT_DOOR_PREFIX = '/services/console/';
export const onFrontDoor = location.pathname.startsWith(FRONT_DOOR_PREFIX);

export function baseUrl(service: Service): string {
  // On the front door every service is on the same origin under its prefix: no CORS needed.
  if (onFrontDoor) return service === 'api' ? location.origin : `${location.origin}/services/${service}`;
  return `${location.protocol}//${service}.${current.domain}${location.port ? ':' + location.port : ''}`;
}

export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value: string | null): void {
  if (value === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, value);
}

/** Reads an error envelope (or anything else) from a failed response. */
export async function errorOf(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { error?: { status?: number; code?: string; message?: string } };
    if (body.error && typeof body.error.message === 'string') {
      return new ApiError(
        body.error.status ?? res.status,
        body.error.code ?? 'error',
        body.error.message || `${res.status} ${body.error.code ?? ''}`,
      );
    }
  } catch {
    // not JSON: fall through
  }
  return new ApiError(
    res.status,
    'http_error',
    `${res.status} ${res.statusText || 'request failed'}${text ? `: ${text.slice(0, 200)}` : ''}`,
  );
}

// Demo mode: the seven read-only mock routes on the console's own origin.
const DEMO_ROUTES: [Service, RegExp, (m: RegExpExecArray) => string][] = [
  ['auth', /^\/v0\/me$/, () => '/fakeapi/authapi/auth/me'],
  ['apikeys', /^\/v0\/projects$/, () => '/fakeapi/projectsapi/v0/projects'],
  ['apikeys', /^\/v0\/projects\/([^/]+)$/, (m) => `/fakeapi/projectsapi/v0/projects/${m[1]}`],
  ['docdb', /^\/v1\/databases$/, () => '/fakeapi/inceptionapi/v1/databases'],
  ['docdb', /^\/v1\/databases\/([^/]+)\/collections$/, (m) => `/fakeapi/inceptionapi/v1/databases/${m[1]}/collections`],
  ['lambda', /^\/api\/v0\/lambdas$/, () => '/fakeapi/lambdasapi/api/v0/lambdas'],
  ['files', /^\/v1\/buckets$/, () => '/fakeapi/filesapi/v1/buckets'],
];

function demoPath(service: Service, path: string): string | null {
  for (const [s, pattern, target] of DEMO_ROUTES) {
    if (s !== service) continue;
    const m = pattern.exec(path);
    if (m) return target(m);
  }
  return null;
}

export interface CallOptions {
  method?: string;
  /** A JSON value (sent as JSON), or a string / Blob sent as is. */
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** false: do not send the session token (cookies still ride along). */
  bearer?: boolean;
}

/** One request to a service; resolves with the response when it is 2xx/3xx, else throws ApiError. */
export async function call(service: Service, path: string, options: CallOptions = {}): Promise<Response> {
  const method = options.method ?? 'GET';
  if (current.demo) {
    const mock = method === 'GET' ? demoPath(service, path) : null;
    if (mock === null) {
      throw new ApiError(0, 'demo', method === 'GET' ? DEMO_UNAVAILABLE : DEMO_READ_ONLY);
    }
    const res = await fetch(mock, { signal: options.signal });
    if (!res.ok) throw await errorOf(res);
    return res;
  }
  const headers: Record<string, string> = { ...options.headers };
  const bearer = options.bearer === false ? null : token();
  if (bearer && headers.authorization === undefined) headers.authorization = `Bearer ${bearer}`;
  let body: BodyInit | undefined;
  if (options.body !== undefined) {
    if (typeof options.body === 'string' || options.body instanceof Blob) {
      body = options.body;
    } else {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
  }
  let res: Response;
  try {
    res = await fetch(baseUrl(service) + path, {
      method,
      headers,
      body,
      credentials: 'include',
      signal: options.signal,
    });
  } catch (err) {
    if (err instanceof DOMException && err.name === 'AbortError') throw err;
    throw new ApiError(
      0,
      'network_error',
      `Could not reach ${service}.${current.domain}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  if (!res.ok) {
    // The scheduler answers 401 for a missing scheduler key: that says nothing about the session.
    if (res.status === 401 && bearer && service !== 'scheduler' && !(service === 'auth' && path === '/v0/login')) {
      window.dispatchEvent(new Event(UNAUTHORIZED_EVENT));
    }
    throw await errorOf(res);
  }
  return res;
}

/** A request whose answer is one JSON value (or nothing: null). */
export async function json<T>(service: Service, path: string, options: CallOptions = {}): Promise<T> {
  const res = await call(service, path, options);
  const text = await res.text();
  return (text.trim() === '' ? null : JSON.parse(text)) as T;
}

/** A request whose answer is NDJSON; an `{"error":…}` line mid-stream is thrown after the lines before it. */
export async function ndjson<T>(service: Service, path: string, options: CallOptions = {}): Promise<T[]> {
  const res = await call(service, path, options);
  const text = await res.text();
  const out: T[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const value = JSON.parse(line) as T | { error?: { message?: string; code?: string; status?: number } };
    if (
      value !== null &&
      typeof value === 'object' &&
      !Array.isArray(value) &&
      Object.keys(value).length === 1 &&
      'error' in value &&
      value.error &&
      typeof value.error === 'object'
    ) {
      const e = value.error as { message?: string; code?: string; status?: number };
      if (typeof e.message === 'string') throw new ApiError(e.status ?? 500, e.code ?? 'error', e.message);
    }
    out.push(value as T);
  }
  return out;
}

/** Reads a streamed answer chunk by chunk as text until it ends or `signal` aborts. */
export async function stream(
  service: Service,
  path: string,
  onText: (text: string) => void,
  options: CallOptions = {},
): Promise<void> {
  const res = await call(service, path, options);
  if (!res.body) return;
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      onText(decoder.decode(value, { stream: true }));
    }
    const rest = decoder.decode();
    if (rest) onText(rest);
  } finally {
    reader.releaseLock();
  }
}

/** Uploads a body with XMLHttpRequest so that progress can be shown. Resolves with the parsed JSON answer. */
export function upload<T>(
  service: Service,
  path: string,
  body: Blob,
  onProgress: (loaded: number, total: number) => void,
): Promise<T> {
  return new Promise((resolve, reject) => {
    if (current.demo) return reject(new ApiError(0, 'demo', DEMO_READ_ONLY));
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', baseUrl(service) + path);
    xhr.withCredentials = true;
    const bearer = token();
    if (bearer) xhr.setRequestHeader('Authorization', `Bearer ${bearer}`);
    if (body.type) xhr.setRequestHeader('Content-Type', body.type);
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : body.size);
    xhr.onerror = () => reject(new ApiError(0, 'network_error', 'Upload failed: the server could not be reached.'));
    xhr.onabort = () => reject(new ApiError(0, 'aborted', 'Upload cancelled.'));
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        onProgress(body.size, body.size);
        try {
          resolve(JSON.parse(xhr.responseText) as T);
        } catch {
          resolve(null as T);
        }
        return;
      }
      void errorOf(new Response(xhr.responseText, { status: xhr.status, statusText: xhr.statusText })).then(reject);
    };
    xhr.send(body);
  });
}

/** Turns any thrown value into a message for the user. */
export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/** Encodes each segment of a path (keeps the slashes). */
export function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}
