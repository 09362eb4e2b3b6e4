import { Writable } from 'node:stream';
import pino from 'pino';
import type { ServiceName, Settings } from '../../src/config.ts';
import { createServiceApp, type ServiceApp } from '../../src/core/app.ts';
import { VERSION } from '../../src/core/version.ts';
import { buildGatewayApp } from '../../src/gateway/app.ts';
import { Authenticator } from '../../src/gateway/authenticate.ts';
import type { CredentialGuard } from '../../src/gateway/guard.ts';
import { ApiKeyVerifier } from '../../src/gateway/keys.ts';
import { credentialedOrigins } from '../../src/gateway/origins.ts';
import { createPolicy } from '../../src/gateway/policy.ts';
import { ProjectDirectory } from '../../src/gateway/projects.ts';
import { createGatewayHandler, listen, type Listener } from '../../src/gateway/server.ts';
import { GatewayStats } from '../../src/gateway/stats.ts';
import { InstanceRegistry, instancesMigrations } from '../../src/instances/index.ts';
import { apikeysService } from '../../src/services/apikeys/index.ts';
import { authService } from '../../src/services/auth/index.ts';
import { OidcProviders } from '../../src/services/auth/oidc.ts';
import { createSession, createUser, type User } from '../../src/services/auth/repository.ts';
import { migrateStore, openStore, type Store } from '../../src/store/index.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { request, type HttpResponse } from '../helpers/http.ts';
import { asUser, testSettings } from '../helpers/service.ts';

/** What the echo backend saw of a request. */
export interface Seen {
  headers: Record<string, string>;
  rawHeaders: string[];
  url: string;
  method: string;
  body: string;
}

/** A backend that answers with the request it received, to see what the gateway forwarded. */
async function echoApp(): Promise<ServiceApp> {
  const app = await createServiceApp({ name: 'echo', version: '0', logger: pino({ level: 'silent' }) });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  app.all('/*', async (request) => ({
    headers: request.headers,
    rawHeaders: request.raw.rawHeaders,
    url: request.url,
    method: request.method,
    body: request.body ?? '',
  }));
  await app.ready();
  return app;
}

export interface Harness {
  readonly publicPort: number;
  readonly internalPort: number;
  readonly store: Store;
  readonly keys: ApiKeyVerifier;
  readonly stats: GatewayStats;
  readonly instance: InstanceRegistry;
  /** Access-log lines written so far (parsed JSON). */
  readonly accessLog: Record<string, unknown>[];
  apikeys: ServiceApp;
  /** A request to the public port. */
  call(options: {
    method?: string;
    path?: string;
    host?: string;
    headers?: Record<string, string>;
    body?: string;
  }): Promise<HttpResponse>;
  /** A request to the internal port. */
  callInternal(options: {
    method?: string;
    path?: string;
    host?: string;
    headers?: Record<string, string>;
    body?: string;
  }): Promise<HttpResponse>;
  /** The request as the echo backend saw it (for hosts served by the echo app). */
  seen(response: HttpResponse): Seen;
  user(email: string): Promise<User>;
  session(user: User): Promise<string>;
  createKey(user: User, body: Record<string, unknown>): Promise<{ key: string; secret: string }>;
  createProject(user: User, slug: string): Promise<{ id: string; slug: string }>;
  close(): Promise<void>;
}

/**
 * The gateway over real sockets with its real authentication step and the apikeys and auth
 * services, and an echo backend standing in for the services whose hosts the tests call
 * (`config`, `lambda` (project hosts), `docdb`, `kv`, `run`).
 */
export async function startHarness(
  overrides: Partial<Settings> = {},
  extras: { guard?: CredentialGuard } = {},
): Promise<Harness> {
  const database: TestDatabase = await createTestDatabase();
  const settings = testSettings(database, overrides);
  const store = await openStore(settings);
  await migrateStore(store, [instancesMigrations, apikeysService.migrations, authService.migrations]);
  const silent = pino({ level: 'silent' });
  const apikeys = await apikeysService.build({ settings, store, logger: silent, version: VERSION });
  const auth = await authService.build({ settings, store, logger: silent, version: VERSION });
  await apikeys.ready();
  await auth.ready();
  const echo = await echoApp();
  const services = new Map<ServiceName, ServiceApp>([
    ['apikeys', apikeys],
    ['auth', auth],
    ['config', echo],
    ['lambda', echo],
    ['docdb', echo],
    ['kv', echo],
    ['run', echo],
  ]);
  const accessLog: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n'))
        if (line.trim()) accessLog.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const logger = pino({ level: 'info' }, sink);
  const instance = await InstanceRegistry.start(store.sql.database, {
    version: VERSION,
    services: [...services.keys()],
    timeoutMs: settings.instanceTimeoutSeconds * 1000,
    flushMs: settings.statsFlushSeconds * 1000,
    logger: silent,
  });
  const stats = new GatewayStats(instance);
  const gateway = await buildGatewayApp({
    version: VERSION,
    logger: silent,
    domain: settings.domain,
    connection: store.sql,
    stats,
    services,
    upstreamUrls: {},
  });
  await gateway.ready();
  const keys = new ApiKeyVerifier(store.sql, store.notifier);
  const projects = new ProjectDirectory(store.sql, store.notifier);
  const authenticator = new Authenticator(
    store.sql,
    keys,
    new OidcProviders(settings.authProviders),
    settings,
    extras.guard,
  );
  const options = {
    domain: settings.domain,
    services,
    upstreams: new Map(),
    gateway,
    projects,
    policy: createPolicy(settings.routePolicies),
    credentialedOrigins: credentialedOrigins(settings),
    stats,
    logger,
  };
  const listeners: Listener[] = [
    await listen(createGatewayHandler({ ...options, authenticator }, false), 0, '127.0.0.1'),
    await listen(createGatewayHandler({ ...options, authenticator: null }, true), 0, '127.0.0.1'),
  ];
  const [publicListener, internalListener] = listeners as [Listener, Listener];

  return {
    publicPort: publicListener.port,
    internalPort: internalListener.port,
    store,
    keys,
    stats,
    instance,
    accessLog,
    apikeys,
    call: (o) => request(publicListener.port, { host: 'config.localhost', ...o }),
    callInternal: (o) => request(internalListener.port, { host: 'config.localhost', ...o }),
    seen: (response) => response.json<Seen>(),
    user: (email) => createUser(store.sql, { email, password: 'correct horse battery', nick: email.split('@')[0] }),
    session: async (user) => (await createSession(store.sql, user.id)).token,
    async createKey(user, body) {
      const res = await apikeys.inject({
        method: 'POST',
        url: '/v0/apikeys',
        headers: { ...asUser(user.id), 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
      if (res.statusCode !== 201) throw new Error(`key creation failed: ${res.body}`);
      return res.json<{ key: string; secret: string }>();
    },
    async createProject(user, slug) {
      const res = await apikeys.inject({
        method: 'POST',
        url: '/v0/projects',
        headers: { ...asUser(user.id), 'content-type': 'application/json' },
        payload: JSON.stringify({ name: slug, slug }),
      });
      if (res.statusCode !== 201) throw new Error(`project creation failed: ${res.body}`);
      return res.json<{ id: string; slug: string }>();
    },
    async close() {
      await Promise.all(listeners.map((l) => l.close()));
      keys.close();
      projects.close();
      await Promise.all([apikeys, auth, echo, gateway].map((a) => a.close()));
      await instance.close();
      await store.close();
      await database.cleanup();
    },
  };
}
