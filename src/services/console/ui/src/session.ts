// What is the console's own around the platform client: its config (console-config.json), the
// session token kept for the tab, the 401 event, the front door's base URL, and demo mode as a
// fetch that answers from the console's mock routes. Transport, errors and uploads are the client's.
import { createClient, StratusError, type StratusClient } from '@stratus/client';

export interface ConsoleConfig {
  demo: boolean;
  domain: string;
  providers: { name: string }[];
  /** Self sign-up is open (`SIGNUP=open`). */
  signup: boolean;
  version: string;
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
  if (!res.ok)
    throw new StratusError(res.status, 'config_unavailable', `console-config.json: ${res.status} ${res.statusText}`);
  const body = (await res.json()) as Partial<ConsoleConfig>;
  current = {
    demo: body.demo === true,
    domain: typeof body.domain === 'string' && body.domain !== '' ? body.domain : current.domain,
    providers: Array.isArray(body.providers) ? body.providers.filter((p) => typeof p?.name === 'string') : [],
    signup: body.signup === true,
    version: typeof body.version === 'string' ? body.version : '',
  };
  client = null;
  return current;
}

/** The front door's prefix the console was loaded under (root README.md, One base URL), or null on its own host. */
const FRONT_DOOR_PREFIX = '/services/console/';
export const onFrontDoor = location.pathname.startsWith(FRONT_DOOR_PREFIX);

/**
 * The front door every call goes to: this origin under /services/console/, else the bare domain
 * with this page's scheme and port (the gateway grants console.<domain> credentialed CORS).
 */
export function platformUrl(): string {
  if (onFrontDoor) return location.origin;
  return `${location.protocol}//${current.domain}${location.port ? ':' + location.port : ''}`;
}

/**
 * A page of a service's own host that the browser navigates to (single sign-on): its cookies must
 * be set on that host, so it is not reached through the front door from console.<domain>.
 */
export function servicePageUrl(service: string, path: string): string {
  if (onFrontDoor) return `${location.origin}/services/${service}${path}`;
  return `${location.protocol}//${service}.${current.domain}${location.port ? ':' + location.port : ''}${path}`;
}

// The token lives in sessionStorage: one tab's session, gone when the tab closes.
function storedToken(): string | undefined {
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

export function token(): string | null {
  return platform().transport.token ?? null;
}

export function setToken(value: string | null): void {
  if (value === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, value);
  if (client) client.transport.token = value ?? undefined;
}

let client: StratusClient | null = null;

/** The platform client with the console's session token; made after the config is loaded. */
export function platform(): StratusClient {
  client ??= createClient({ url: platformUrl(), token: storedToken(), fetch: consoleFetch });
  return client;
}

/** A client for one scheduler's calls, which carry its key as `X-API-Key` instead of the session. */
export function withSchedulerKey(key: string): StratusClient {
  return createClient({ url: platformUrl(), token: storedToken(), schedulerKey: key, fetch: consoleFetch });
}

function consoleFetch(input: RequestInfo | URL, init: RequestInit = {}): Promise<Response> {
  return current.demo ? demoFetch(input, init) : sessionFetch(input, init);
}

/**
 * The browser's fetch with the cookie session too (single sign-on's cookie, which logout also
 * ends), firing UNAUTHORIZED_EVENT when a call carrying the session token is refused with 401.
 */
async function sessionFetch(input: RequestInfo | URL, init: RequestInit): Promise<Response> {
  const res = await fetch(input, { ...init, credentials: 'include' });
  if (res.status === 401 && new Headers(init.headers).has('authorization')) {
    const path = new URL(String(input instanceof Request ? input.url : input)).pathname;
    // The scheduler answers 401 for a wrong scheduler key, and a failed sign-in is no ended session.
    if (!path.startsWith('/services/scheduler/') && path !== '/services/auth/v0/login')
      window.dispatchEvent(new Event(UNAUTHORIZED_EVENT));
  }
  return res;
}

// Demo mode: the seven read-only mock routes on the console's own origin.
const DEMO_ROUTES: [RegExp, (m: RegExpExecArray) => string][] = [
  [/^\/auth\/v0\/me$/, () => '/fakeapi/authapi/auth/me'],
  [/^\/apikeys\/v0\/projects$/, () => '/fakeapi/projectsapi/v0/projects'],
  [/^\/apikeys\/v0\/projects\/([^/]+)$/, (m) => `/fakeapi/projectsapi/v0/projects/${m[1]}`],
  [/^\/docdb\/v1\/databases$/, () => '/fakeapi/inceptionapi/v1/databases'],
  [/^\/docdb\/v1\/databases\/([^/]+)\/collections$/, (m) => `/fakeapi/inceptionapi/v1/databases/${m[1]}/collections`],
  [/^\/lambda\/api\/v0\/lambdas$/, () => '/fakeapi/lambdasapi/api/v0/lambdas'],
  [/^\/files\/v1\/buckets$/, () => '/fakeapi/filesapi/v1/buckets'],
];

/** Answers the mock routes; anything else is refused with the platform's error envelope, so the client throws it. */
async function demoFetch(input: RequestInfo | URL, init: RequestInit): Promise<Response> {
  const method = (init.method ?? 'GET').toUpperCase();
  const url = new URL(String(input instanceof Request ? input.url : input));
  const path = url.pathname.replace(/^\/services/, '');
  if (method === 'GET') {
    for (const [pattern, target] of DEMO_ROUTES) {
      const m = pattern.exec(path);
      if (m) return fetch(target(m), { signal: init.signal });
    }
  }
  const message = method === 'GET' ? DEMO_UNAVAILABLE : DEMO_READ_ONLY;
  return Response.json({ error: { status: 403, code: 'demo', message } }, { status: 403 });
}

/** Turns any thrown value into a message for the user. */
export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
