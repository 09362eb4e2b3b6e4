import pino from 'pino';
import type { FastifyBaseLogger } from 'fastify';
import type { ServiceName, Settings } from './config.ts';
import { SettingsError } from './config.ts';
import type { ServiceApp } from './core/app.ts';
import type { ServiceDefinition } from './core/service.ts';
import { VERSION } from './core/version.ts';
import { buildGatewayApp } from './gateway/app.ts';
import { createGatewayHandler, listen, type Listener, type ProjectLookup } from './gateway/server.ts';
import { AVAILABLE_SERVICES } from './services/index.ts';
import { findProjectBySlug } from './services/apikeys/repository.ts';
import { migrateStore, openStore, type Store } from './store/index.ts';

export interface RunningPlatform {
  readonly publicPort: number;
  readonly internalPort: number;
  readonly services: readonly ServiceName[];
  readonly store: Store;
  close(): Promise<void>;
}

/** The service definitions a process runs: `--services`, or every available one. */
export function selectServices(settings: Pick<Settings, 'services'>): ServiceDefinition[] {
  if (settings.services === null) return [...AVAILABLE_SERVICES.values()];
  return settings.services.map((name) => {
    const definition = AVAILABLE_SERVICES.get(name);
    if (!definition) throw new SettingsError(`the ${name} service is not available in this build (available: ${[...AVAILABLE_SERVICES.keys()].join(', ')})`);
    return definition;
  });
}

export function createLogger(settings: Pick<Settings, 'logLevel'>): FastifyBaseLogger {
  return pino({ level: settings.logLevel, base: { pid: process.pid } });
}

/** Applies every available service's migrations (`stratus migrate`). */
export async function migrateAll(settings: Settings): Promise<string[]> {
  const store = await openStore(settings);
  try {
    return await migrateStore(store, [...AVAILABLE_SERVICES.values()].map((s) => s.migrations));
  } finally {
    await store.close();
  }
}

/**
 * One Stratus process: the store, the selected services' apps (migrated and ready), and the
 * gateway on the public port and on the loopback-only internal port.
 */
export async function startPlatform(settings: Settings, logger: FastifyBaseLogger = createLogger(settings)): Promise<RunningPlatform> {
  const definitions = selectServices(settings);
  const store = await openStore(settings);
  const apps = new Map<ServiceName, ServiceApp>();
  const listeners: Listener[] = [];
  let gateway: ServiceApp | null = null;
  const close = async () => {
    await Promise.all(listeners.map((l) => l.close()));
    await Promise.all([...apps.values(), ...(gateway ? [gateway] : [])].map((app) => app.close()));
    await store.close();
  };
  try {
    await migrateStore(store, definitions.map((d) => d.migrations));
    for (const definition of definitions) {
      const app = await definition.build({ settings, store, logger: logger.child({ service: definition.name }), version: VERSION });
      await app.ready();
      apps.set(definition.name, app);
    }
    gateway = await buildGatewayApp({ version: VERSION, logger: logger.child({ service: 'gateway' }) });
    await gateway.ready();
    // Project hosts are read from the shared projects table, whichever process runs the apikeys service.
    const projects: ProjectLookup = (slug) => findProjectBySlug(store.sql, slug);
    const options = { domain: settings.domain, services: apps, gateway, projects, logger };
    listeners.push(await listen(createGatewayHandler(options, false), settings.port, settings.host));
    listeners.push(await listen(createGatewayHandler(options, true), settings.internalPort, '127.0.0.1'));
  } catch (error) {
    await close().catch(() => {});
    throw error;
  }
  return {
    publicPort: listeners[0]!.port,
    internalPort: listeners[1]!.port,
    services: [...apps.keys()],
    store,
    close,
  };
}
