import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { parseProxyEntry } from './core/addresses.ts';
import { webOrigin } from './core/host.ts';

/** Every service a Stratus process can run; the gateway is always there. */
export const SERVICE_NAMES = [
  'auth',
  'apikeys',
  'lambda',
  'scheduler',
  'docdb',
  'logs',
  'files',
  'config',
  'run',
  'kv',
  'console',
] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

export interface AuthProviderSettings {
  name: string;
  issuer: string;
  clientId: string;
  clientSecret: string;
}

/** A route policy rule from the config file (`gateway.routes`), checked before the defaults. */
export interface RoutePolicyRule {
  /** Host label (`files`, `api`, a project slug) or `*` for any host. */
  host: string;
  /** Path prefix, matched at a segment boundary. */
  prefix: string;
  auth: 'require' | 'optional';
}

export interface Settings {
  /** Public port (0 picks a free one). */
  port: number;
  /** Address the public port binds; all interfaces by default. */
  host: string;
  /** Internal port (0 picks a free one). */
  internalPort: number;
  /**
   * Address the internal port binds: 127.0.0.1 by default. A scale-out deployment whose gateways
   * reach services on other machines binds it to a private interface instead; it trusts identity
   * headers as sent, so it must never be reachable from outside.
   */
  internalHost: string;
  domain: string;
  dataDir: string;
  /** Unset: SQLite under dataDir. */
  databaseUrl: string | undefined;
  adminEmail: string | undefined;
  adminPassword: string | undefined;
  signup: 'open' | 'closed';
  cookieSecure: boolean;
  authProviders: AuthProviderSettings[];
  schedulerApiKeys: string[];
  /** Deliveries to a scheduler's target (lambda or webhook) at once, per scheduler, per instance (scheduler README: Delivery). */
  schedulerDeliveryConcurrency: number;
  /**
   * Seconds a platform delivery holds its task's lease; unset: the longest delivery (LAMBDA_TIMEOUT
   * or the 30 s webhook timeout) + 30 s. A delivery whose instance dies is redelivered after it.
   */
  schedulerDeliveryLeaseSeconds: number | undefined;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Services that run in this process; null = every available one. */
  services: ServiceName[] | null;
  /** SQLite durability: FULL survives power loss, NORMAL only a process crash. */
  sqliteSynchronous: 'FULL' | 'NORMAL';
  /** SQLite's page cache for the platform database, in bytes (`SQLITE_CACHE`). */
  sqliteCacheBytes: number;
  /** How much of the SQLite database file is memory-mapped, in bytes; 0 = none (`SQLITE_MMAP`). */
  sqliteMmapBytes: number;
  /** Seconds the event loop must be idle before memory a burst left is given back; 0 = never (`IDLE_MEMORY_RELEASE`). */
  idleMemoryReleaseSeconds: number;
  /** Services that run in another process: name → base URL (`UPSTREAM_<NAME>` or `upstreams`). */
  upstreams: Partial<Record<ServiceName, string>>;
  /** Extra route policies (config file `gateway.routes`), checked before the built-in defaults. */
  routePolicies: RoutePolicyRule[];
  /** Seconds to wait for a remote upstream's response headers before answering 504. */
  upstreamTimeoutSeconds: number;
  /** Destinations a lambda's fetch may reach besides public addresses: hosts, `*.suffix`, addresses, CIDRs (lambda README: Fetch). */
  lambdaEgressAllow: string;
  /** Requests (fetch hops and binding calls) one lambda invocation may make. */
  lambdaFetchRequests: number;
  /** Of those, how many may be in flight at once. */
  lambdaFetchConcurrency: number;
  /** Bytes of answers (fetch and bindings) one invocation may receive, all together. */
  lambdaFetchBytes: number;
  /** Redirects one fetch follows. */
  lambdaFetchRedirects: number;
  /** Wall-clock limit of one lambda invocation, in seconds. */
  lambdaTimeoutSeconds: number;
  /** Memory limit of a lambda isolate, in MiB. */
  lambdaMemoryMib: number;
  /** Largest response body a lambda may produce, in bytes; above → 500 `lambda_response_too_large`. */
  lambdaMaxResponseBytes: number;
  /** Invocations of one owner's lambdas that run at once (as many more wait); beyond → 429. */
  lambdaOwnerConcurrency: number;
  /**
   * Key that encrypts lambda secrets at rest (32 bytes, given as 64 hex characters or base64);
   * unset: the key file `<dataDir>/lambda-secrets.key` (src/services/lambda/README.md: Environment
   * and secrets). Every instance of a platform needs the same key.
   */
  lambdaSecretsKey: Buffer | undefined;
  /** Invocations of each lambda kept in its history (the newest; older ones are deleted). */
  lambdaInvocationHistory: number;
  /** Retained bytes per logger (raw lines and events together); the oldest data goes first. */
  logsMaxBytes: number;
  /** Largest logs ingest body, in bytes; above → 413. */
  logsMaxIngestBytes: number;
  /** Largest file upload, in bytes; above → 413. */
  filesMaxUploadBytes: number;
  /** Largest registry blob, in bytes; above → 413 `SIZE_INVALID`. */
  runMaxBlobBytes: number;
  /**
   * The run service's runtime driver: `recording` keeps the desired state only; `podman` runs
   * containers with the machine's podman (src/services/run/README.md: The podman driver).
   */
  runDriver: 'recording' | 'podman';
  /** The podman binary the podman driver calls. */
  runPodman: string;
  /** Each container's memory limit, in bytes. */
  runMemoryBytes: number;
  /** Each container's CPU limit, in CPUs (fractions allowed). */
  runCpus: number;
  /** The engine's restart policy for the containers it runs. */
  runRestart: 'no' | 'on-failure' | 'always' | 'unless-stopped';
  /** How long a new container has to come up (running, its port answering) before it counts as failed. */
  runStartTimeoutSeconds: number;
  /** How long a stopped container has after SIGTERM before it is killed. */
  runStopTimeoutSeconds: number;
  /** A key-value node with a parent replicates it (README.md: Settings, `kvParentUrl`); unset = a primary. */
  kvParentUrl: string | undefined;
  /** The key-value node's name in health and status answers. */
  kvNodeName: string;
  /** Headers a replica sends to its parent (credentials when the parent is behind a gateway). */
  kvParentHeaders: Record<string, string>;
  /** The web console shows the mock API's canned data instead of the real services. */
  consoleDemo: boolean;
  /** Public port: a request body that sends no byte for this long is cut (408); 0 = never. */
  bodyIdleTimeoutSeconds: number;
  /** Public port: open connections one client address may hold; more are closed at once. */
  maxConnectionsPerAddress: number;
  /**
   * Origins (`scheme://host[:port]`, exact) besides the console that a single sign-on may send
   * its one-time hand-over code to (`SSO_REDIRECT_ORIGINS`, comma-separated); see the auth README.
   */
  ssoRedirectOrigins: string[];
  /**
   * Origins (`scheme://host[:port]`, exact) whose pages may call the platform with the browser's
   * session cookie (`CORS_ORIGINS`, comma-separated): credentialed CORS and the CSRF check
   * (root README.md: CORS; SECURITY.md). Never a host that serves user code.
   */
  corsOrigins: string[];
  /**
   * On SIGTERM/SIGINT: seconds in-flight requests may take to finish before their connections are
   * cut (README.md: Rolling restarts); 0 cuts them at once.
   */
  shutdownTimeout: number;
  /**
   * On SIGTERM/SIGINT: seconds both ports keep serving as before while readiness already answers
   * 503, so that a load balancer stops sending here before any connection closes (README.md:
   * Rolling restarts); 0 drains at once.
   */
  shutdownDelay: number;
  /** An instance whose heartbeat is older than this drops out of the platform's figures (src/instances/README.md). */
  instanceTimeoutSeconds: number;
  /** How often an instance writes its changed statistics counters (src/instances/README.md). */
  statsFlushSeconds: number;
  /**
   * Load balancers and reverse proxies in front of the public port (IP addresses or CIDR blocks,
   * `TRUSTED_PROXIES`, comma-separated): requests they forward count as their `X-Forwarded-For`
   * client (src/gateway/client-address.ts; README: Deployment).
   */
  trustedProxies: string[];
  /**
   * The bearer token that opens `GET /metrics` on the public port (`METRICS_TOKEN`); unset: the
   * public port does not serve it (the internal port always does). Never logged.
   */
  metricsToken: string | undefined;
  /** One access-log line per request (`ACCESS_LOG`, on by default; `off` writes none). */
  accessLog: boolean;
}

export class SettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SettingsError';
  }
}

/** CLI flags as parsed by the CLI (`--port 0` → `{ port: '0' }`). */
export type FlagValues = Partial<Record<SettingKey | 'config', string>>;

type SettingKey = Exclude<keyof Settings, 'authProviders' | 'upstreams' | 'routePolicies'>;

/** Each setting: its environment variable and how to read a text value. */
const SETTINGS: {
  [K in SettingKey]: { env: string; parse: (text: string, from: string) => Settings[K]; fallback: Settings[K] };
} = {
  port: { env: 'PORT', parse: (t, f) => port(t, f), fallback: 8080 },
  host: { env: 'HOST', parse: (t, f) => nonEmpty(t, f), fallback: '0.0.0.0' },
  internalPort: { env: 'INTERNAL_PORT', parse: (t, f) => port(t, f), fallback: 8081 },
  internalHost: { env: 'INTERNAL_HOST', parse: (t, f) => nonEmpty(t, f), fallback: '127.0.0.1' },
  domain: { env: 'DOMAIN', parse: (t, f) => domain(t, f), fallback: 'localhost' },
  dataDir: { env: 'DATA_DIR', parse: (t, f) => nonEmpty(t, f), fallback: './data' },
  databaseUrl: { env: 'DATABASE_URL', parse: (t, f) => databaseUrl(t, f), fallback: undefined },
  adminEmail: { env: 'ADMIN_EMAIL', parse: (t, f) => nonEmpty(t, f), fallback: undefined },
  adminPassword: { env: 'ADMIN_PASSWORD', parse: (t, f) => nonEmpty(t, f), fallback: undefined },
  signup: { env: 'SIGNUP', parse: (t, f) => oneOf(t, f, ['open', 'closed'] as const), fallback: 'closed' },
  cookieSecure: { env: 'COOKIE_SECURE', parse: (t, f) => bool(t, f), fallback: true },
  schedulerApiKeys: { env: 'SCHEDULER_API_KEYS', parse: (t) => list(t), fallback: [] },
  schedulerDeliveryConcurrency: {
    env: 'SCHEDULER_DELIVERY_CONCURRENCY',
    parse: (t, f) => positiveInteger(t, f),
    fallback: 8,
  },
  schedulerDeliveryLeaseSeconds: {
    env: 'SCHEDULER_DELIVERY_LEASE',
    parse: (t, f) => positiveNumber(t, f),
    fallback: undefined,
  },
  logLevel: {
    env: 'LOG_LEVEL',
    parse: (t, f) => oneOf(t, f, ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const),
    fallback: 'info',
  },
  services: { env: 'SERVICES', parse: (t, f) => services(t, f), fallback: null },
  sqliteSynchronous: {
    env: 'SQLITE_SYNCHRONOUS',
    parse: (t, f) => oneOf(t, f, ['FULL', 'NORMAL'] as const),
    fallback: 'FULL',
  },
  // bench/README.md (memory): mapped pages count in the server's RSS and grow with every byte read
  // (a logs filter over 200 MB mapped 200 MB), and indexed reads measured no faster with them.
  sqliteCacheBytes: { env: 'SQLITE_CACHE', parse: (t, f) => byteSize(t, f), fallback: 32 * 1024 ** 2 },
  sqliteMmapBytes: {
    env: 'SQLITE_MMAP',
    parse: (t, f) => (t.trim() === '0' ? 0 : byteSize(t, f)),
    fallback: 0,
  },
  // src/idle-memory.ts: off unless asked for. The last-resort collection also drops the compiled
  // code, and the gateway bench measured the next bursts at about half the throughput (bench/README.md, Memory).
  idleMemoryReleaseSeconds: {
    env: 'IDLE_MEMORY_RELEASE',
    parse: (t, f) => nonNegativeInteger(t, f),
    fallback: 0,
  },
  upstreamTimeoutSeconds: { env: 'UPSTREAM_TIMEOUT', parse: (t, f) => positiveNumber(t, f), fallback: 30 },
  lambdaEgressAllow: { env: 'LAMBDA_EGRESS_ALLOW', parse: (t) => t.trim(), fallback: '' },
  lambdaFetchRequests: { env: 'LAMBDA_FETCH_REQUESTS', parse: (t, f) => positiveInteger(t, f), fallback: 50 },
  lambdaFetchConcurrency: { env: 'LAMBDA_FETCH_CONCURRENCY', parse: (t, f) => positiveInteger(t, f), fallback: 8 },
  lambdaFetchBytes: { env: 'LAMBDA_FETCH_BYTES', parse: (t, f) => byteSize(t, f), fallback: 10 * 1024 ** 2 },
  lambdaFetchRedirects: { env: 'LAMBDA_FETCH_REDIRECTS', parse: (t, f) => nonNegativeInteger(t, f), fallback: 5 },
  lambdaTimeoutSeconds: { env: 'LAMBDA_TIMEOUT', parse: (t, f) => positiveNumber(t, f), fallback: 10 },
  lambdaMemoryMib: { env: 'LAMBDA_MEMORY_MIB', parse: (t, f) => positiveNumber(t, f), fallback: 128 },
  lambdaMaxResponseBytes: {
    env: 'LAMBDA_MAX_RESPONSE_BYTES',
    parse: (t, f) => byteSize(t, f),
    fallback: 6 * 1024 ** 2,
  },
  lambdaOwnerConcurrency: { env: 'LAMBDA_OWNER_CONCURRENCY', parse: (t, f) => positiveInteger(t, f), fallback: 8 },
  lambdaSecretsKey: { env: 'LAMBDA_SECRETS_KEY', parse: (t, f) => key32(t, f), fallback: undefined },
  lambdaInvocationHistory: {
    env: 'LAMBDA_INVOCATION_HISTORY',
    parse: (t, f) => positiveInteger(t, f),
    fallback: 100,
  },
  logsMaxBytes: { env: 'LOGS_MAX_BYTES', parse: (t, f) => byteSize(t, f), fallback: 1024 ** 3 },
  logsMaxIngestBytes: { env: 'LOGS_MAX_INGEST_BYTES', parse: (t, f) => byteSize(t, f), fallback: 64 * 1024 ** 2 },
  filesMaxUploadBytes: { env: 'FILES_MAX_UPLOAD_BYTES', parse: (t, f) => byteSize(t, f), fallback: 10 * 1024 ** 3 },
  runMaxBlobBytes: { env: 'RUN_MAX_BLOB_BYTES', parse: (t, f) => byteSize(t, f), fallback: 10 * 1024 ** 3 },
  runDriver: {
    env: 'RUN_DRIVER',
    parse: (t, f) => oneOf(t, f, ['recording', 'podman'] as const),
    fallback: 'recording',
  },
  runPodman: { env: 'RUN_PODMAN', parse: (t, f) => nonEmpty(t, f), fallback: 'podman' },
  runMemoryBytes: { env: 'RUN_MEMORY', parse: (t, f) => byteSize(t, f), fallback: 512 * 1024 ** 2 },
  runCpus: { env: 'RUN_CPUS', parse: (t, f) => positiveNumber(t, f), fallback: 1 },
  runRestart: {
    env: 'RUN_RESTART',
    parse: (t, f) => oneOf(t, f, ['no', 'on-failure', 'always', 'unless-stopped'] as const),
    fallback: 'unless-stopped',
  },
  runStartTimeoutSeconds: { env: 'RUN_START_TIMEOUT', parse: (t, f) => positiveNumber(t, f), fallback: 30 },
  runStopTimeoutSeconds: { env: 'RUN_STOP_TIMEOUT', parse: (t, f) => nonNegativeInteger(t, f), fallback: 10 },
  kvParentUrl: { env: 'KV_PARENT_URL', parse: (t, f) => httpUrl(t, f), fallback: undefined },
  kvNodeName: { env: 'KV_NODE_NAME', parse: (t, f) => nonEmpty(t, f), fallback: hostname() },
  kvParentHeaders: { env: 'KV_PARENT_HEADERS', parse: (t, f) => headerObject(t, f), fallback: {} },
  consoleDemo: { env: 'CONSOLE_DEMO', parse: (t, f) => bool(t, f), fallback: false },
  bodyIdleTimeoutSeconds: { env: 'BODY_IDLE_TIMEOUT', parse: (t, f) => nonNegativeNumber(t, f), fallback: 30 },
  maxConnectionsPerAddress: {
    env: 'MAX_CONNECTIONS_PER_ADDRESS',
    parse: (t, f) => positiveInteger(t, f),
    fallback: 256,
  },
  ssoRedirectOrigins: { env: 'SSO_REDIRECT_ORIGINS', parse: (t, f) => origins(t, f), fallback: [] },
  corsOrigins: { env: 'CORS_ORIGINS', parse: (t, f) => origins(t, f), fallback: [] },
  shutdownTimeout: { env: 'SHUTDOWN_TIMEOUT', parse: (t, f) => nonNegativeNumber(t, f), fallback: 10 },
  shutdownDelay: { env: 'SHUTDOWN_DELAY', parse: (t, f) => nonNegativeNumber(t, f), fallback: 0 },
  instanceTimeoutSeconds: { env: 'INSTANCE_TIMEOUT', parse: (t, f) => positiveNumber(t, f), fallback: 15 },
  statsFlushSeconds: { env: 'STATS_FLUSH_INTERVAL', parse: (t, f) => positiveNumber(t, f), fallback: 2 },
  trustedProxies: { env: 'TRUSTED_PROXIES', parse: (t, f) => proxyList(t, f), fallback: [] },
  metricsToken: { env: 'METRICS_TOKEN', parse: (t, f) => token(t, f), fallback: undefined },
  accessLog: { env: 'ACCESS_LOG', parse: (t, f) => bool(t, f), fallback: true },
};

/**
 * Settings from CLI flags, then environment variables, then the JSON config file
 * (`stratus.config.json` in the working directory, or `--config PATH`), then defaults (README.md: Settings).
 * Throws SettingsError with a message that names the source of a bad value.
 */
export function loadSettings(
  flags: FlagValues = {},
  env: NodeJS.ProcessEnv = process.env,
  cwd = process.cwd(),
): Settings {
  const file = readConfigFile(flags.config, cwd);
  const settings = {} as Record<SettingKey, unknown>;
  for (const key of Object.keys(SETTINGS) as SettingKey[]) {
    const spec = SETTINGS[key];
    const flag = flags[key];
    const envValue = env[spec.env];
    const fileValue = file.values[key];
    if (flag !== undefined) settings[key] = spec.parse(flag, `--${kebab(key)}`);
    else if (envValue !== undefined && envValue !== '') settings[key] = spec.parse(envValue, spec.env);
    else if (fileValue !== undefined)
      settings[key] = spec.parse(fileText(fileValue, key, file.path), `${file.path}: ${key}`);
    else settings[key] = spec.fallback;
  }
  return {
    ...(settings as Omit<Settings, 'authProviders' | 'upstreams' | 'routePolicies'>),
    authProviders: file.providers,
    upstreams: upstreams(file.upstreams, env, file.path),
    routePolicies: file.routePolicies,
  };
}

/** `UPSTREAM_<NAME>=url` overrides the config file's `upstreams: {name: url}`. */
function upstreams(fromFile: unknown, env: NodeJS.ProcessEnv, path: string): Partial<Record<ServiceName, string>> {
  const result: Partial<Record<ServiceName, string>> = {};
  if (fromFile !== undefined) {
    if (typeof fromFile !== 'object' || fromFile === null || Array.isArray(fromFile))
      throw new SettingsError(`${path}: upstreams must be an object of service name → URL`);
    for (const [name, url] of Object.entries(fromFile)) {
      if (!(SERVICE_NAMES as readonly string[]).includes(name))
        throw new SettingsError(`${path}: upstreams: unknown service "${name}"`);
      result[name as ServiceName] = upstreamUrl(url, `${path}: upstreams.${name}`);
    }
  }
  for (const name of SERVICE_NAMES) {
    const value = env[`UPSTREAM_${name.toUpperCase()}`];
    if (value) result[name] = upstreamUrl(value, `UPSTREAM_${name.toUpperCase()}`);
  }
  return result;
}

function upstreamUrl(value: unknown, from: string): string {
  if (typeof value !== 'string') throw new SettingsError(`${from} must be a URL string`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new SettingsError(`${from}: "${value}" is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new SettingsError(`${from} must be an http(s) URL`);
  return url.origin;
}

function routePolicies(gateway: unknown, path: string): RoutePolicyRule[] {
  if (gateway === undefined) return [];
  const routes = (gateway as { routes?: unknown } | null)?.routes;
  if (typeof gateway !== 'object' || gateway === null || !Array.isArray(routes))
    throw new SettingsError(`${path}: gateway must be {"routes":[…]}`);
  return routes.map((entry: unknown, i) => {
    const rule = entry as Record<string, unknown> | null;
    const where = `${path}: gateway.routes[${i}]`;
    if (typeof rule?.host !== 'string' || rule.host === '')
      throw new SettingsError(`${where}.host must be a host label or "*"`);
    if (typeof rule.prefix !== 'string' || !rule.prefix.startsWith('/'))
      throw new SettingsError(`${where}.prefix must be a path starting with /`);
    if (rule.auth !== 'require' && rule.auth !== 'optional')
      throw new SettingsError(`${where}.auth must be "require" or "optional"`);
    return { host: rule.host.toLowerCase(), prefix: rule.prefix, auth: rule.auth };
  });
}

interface ConfigFile {
  path: string;
  values: Record<string, unknown>;
  providers: AuthProviderSettings[];
  upstreams: unknown;
  routePolicies: RoutePolicyRule[];
}

function readConfigFile(explicit: string | undefined, cwd: string): ConfigFile {
  const path = resolve(cwd, explicit ?? 'stratus.config.json');
  if (!existsSync(path)) {
    if (explicit) throw new SettingsError(`config file ${path} does not exist`);
    return { path, values: {}, providers: [], upstreams: undefined, routePolicies: [] };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new SettingsError(`config file ${path} is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new SettingsError(`config file ${path} must hold a JSON object`);
  const { auth, upstreams, gateway, ...values } = parsed as Record<string, unknown>;
  for (const key of Object.keys(values)) {
    if (!(key in SETTINGS))
      throw new SettingsError(
        `config file ${path}: unknown setting "${key}" (known: ${[...Object.keys(SETTINGS), 'auth', 'upstreams', 'gateway'].join(', ')})`,
      );
  }
  return { path, values, providers: providers(auth, path), upstreams, routePolicies: routePolicies(gateway, path) };
}

function providers(auth: unknown, path: string): AuthProviderSettings[] {
  if (auth === undefined) return [];
  const list = (auth as { providers?: unknown } | null)?.providers;
  if (typeof auth !== 'object' || auth === null || !Array.isArray(list))
    throw new SettingsError(`${path}: auth must be {"providers":[…]}`);
  return list.map((entry: unknown, i) => {
    const p = entry as Record<string, unknown> | null;
    for (const field of ['name', 'issuer', 'clientId', 'clientSecret']) {
      if (typeof p?.[field] !== 'string' || p[field] === '')
        throw new SettingsError(`${path}: auth.providers[${i}].${field} must be a non-empty string`);
    }
    const provider = p as unknown as AuthProviderSettings;
    return {
      name: provider.name,
      issuer: provider.issuer,
      clientId: provider.clientId,
      clientSecret: provider.clientSecret,
    };
  });
}

function fileText(value: unknown, key: string, path: string): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value.join(',');
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) return JSON.stringify(value);
  throw new SettingsError(`${path}: ${key} has an unsupported value`);
}

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

function port(text: string, from: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || value > 65535)
    throw new SettingsError(`${from}: "${text}" is not a port number (0–65535)`);
  return value;
}

function positiveNumber(text: string, from: string): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) throw new SettingsError(`${from}: "${text}" must be a positive number`);
  return value;
}

function nonNegativeNumber(text: string, from: string): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || value < 0)
    throw new SettingsError(`${from}: "${text}" must be a number ≥ 0`);
  return value;
}

function nonNegativeInteger(text: string, from: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value))
    throw new SettingsError(`${from}: "${text}" must be a whole number ≥ 0`);
  return value;
}

function positiveInteger(text: string, from: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value <= 0)
    throw new SettingsError(`${from}: "${text}" must be a positive whole number`);
  return value;
}

const BYTE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
};

/** A positive whole number of bytes, optionally with a unit: `1048576`, `64MiB`, `1 GiB`, `500MB`. */
function byteSize(text: string, from: string): number {
  const match = /^\s*(\d+)\s*([a-z]*)\s*$/i.exec(text);
  const unit = match ? BYTE_UNITS[(match[2] ?? '').toLowerCase()] : undefined;
  const value = match && unit !== undefined ? Number(match[1]) * unit : NaN;
  if (!Number.isSafeInteger(value) || value <= 0)
    throw new SettingsError(`${from}: "${text}" must be a positive size in bytes (e.g. 1048576, 64MiB, 1GiB)`);
  return value;
}

/**
 * A 32-byte key given as 64 hex characters or as base64 (standard or URL-safe, padding optional).
 * The message of a bad value never repeats the value: it is a secret.
 */
function key32(text: string, from: string): Buffer {
  const value = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(value)) return Buffer.from(value, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(value)) {
    const key = Buffer.from(value.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (key.length === 32) return key;
  }
  throw new SettingsError(
    `${from} must be a key of 32 bytes given as 64 hex characters or as base64 (44 characters); the value given is not (and is not shown)`,
  );
}

/**
 * A bearer token: printable ASCII without spaces (what an `Authorization` header carries), at
 * least 16 characters so that it cannot be guessed. The message never repeats the value.
 */
function token(text: string, from: string): string {
  if (!/^[\x21-\x7e]{16,}$/.test(text))
    throw new SettingsError(
      `${from} must be at least 16 printable characters without spaces; the value given is not (and is not shown)`,
    );
  return text;
}

function nonEmpty(text: string, from: string): string {
  if (text.trim() === '') throw new SettingsError(`${from} must not be empty`);
  return text;
}

function domain(text: string, from: string): string {
  const value = text.toLowerCase();
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(value))
    throw new SettingsError(`${from}: "${text}" is not a domain name`);
  return value;
}

function httpUrl(text: string, from: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new SettingsError(`${from}: "${text}" is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new SettingsError(`${from} must be an http:// or https:// URL`);
  return text.replace(/\/+$/, '');
}

/** A JSON object of header name → string value (`{"Api-Key":"…","Api-Secret":"…"}`). */
function headerObject(text: string, from: string): Record<string, string> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new SettingsError(`${from} must be a JSON object of header names to strings`);
  }
  if (
    typeof value !== 'object' ||
    value === null ||
    Array.isArray(value) ||
    !Object.values(value).every((v) => typeof v === 'string')
  ) {
    throw new SettingsError(`${from} must be a JSON object of header names to strings`);
  }
  return value as Record<string, string>;
}

/** Comma-separated exact origins (`https://app.example.com`, `http://localhost:5173`), normalised; no wildcards, paths or credentials. */
function origins(text: string, from: string): string[] {
  const origin = (item: string): string => {
    const parsed = webOrigin(item);
    if (parsed === null)
      throw new SettingsError(`${from}: "${item}" is not an origin (scheme://host[:port], no path, no wildcard)`);
    return parsed;
  };
  return [...new Set(list(text).map(origin))];
}

function proxyList(text: string, from: string): string[] {
  const entries = list(text);
  for (const entry of entries) {
    if (!parseProxyEntry(entry))
      throw new SettingsError(`${from}: "${entry}" is not an IP address or CIDR block (such as 10.0.0.0/8)`);
  }
  return entries;
}

function databaseUrl(text: string, from: string): string {
  if (!/^postgres(ql)?:\/\//.test(text)) throw new SettingsError(`${from} must be a postgres:// URL`);
  return text;
}

function oneOf<T extends string>(text: string, from: string, values: readonly T[]): T {
  const match = values.find((v) => v.toLowerCase() === text.toLowerCase());
  if (!match) throw new SettingsError(`${from}: "${text}" must be one of ${values.join(', ')}`);
  return match;
}

function bool(text: string, from: string): boolean {
  if (/^(true|1|yes|on)$/i.test(text)) return true;
  if (/^(false|0|no|off)$/i.test(text)) return false;
  throw new SettingsError(`${from}: "${text}" must be true or false`);
}

function list(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

function services(text: string, from: string): ServiceName[] {
  const names = list(text);
  if (names.length === 0) throw new SettingsError(`${from} names no service`);
  for (const name of names) {
    if (!(SERVICE_NAMES as readonly string[]).includes(name))
      throw new SettingsError(`${from}: unknown service "${name}" (known: ${SERVICE_NAMES.join(', ')})`);
  }
  return [...new Set(names)] as ServiceName[];
}
