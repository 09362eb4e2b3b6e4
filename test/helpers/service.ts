import pino from 'pino';
import { loadSettings, type Settings } from '../../src/config.ts';
import type { ServiceApp } from '../../src/core/app.ts';
import type { ServiceDefinition } from '../../src/core/service.ts';
import { VERSION } from '../../src/core/version.ts';
import { migrateStore, openStore, type Store } from '../../src/store/index.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';

export interface TestService {
  readonly app: ServiceApp;
  readonly store: Store;
  readonly database: TestDatabase;
  readonly settings: Settings;
  close(): Promise<void>;
}

/** Settings for tests: defaults only (no env, no config file), pointed at the test database. */
export function testSettings(database: TestDatabase, overrides: Partial<Settings> = {}): Settings {
  return {
    ...loadSettings({}, {}, database.dataDir),
    dataDir: database.dataDir,
    databaseUrl: database.databaseUrl,
    logLevel: 'silent',
    ...overrides,
  };
}

/** Builds one service on an isolated database (SQLite or a PostgreSQL schema), ready for inject(). */
export async function startTestService(definition: ServiceDefinition, overrides: Partial<Settings> = {}): Promise<TestService> {
  const database = await createTestDatabase();
  const settings = testSettings(database, overrides);
  const store = await openStore(settings);
  await migrateStore(store, [definition.migrations]);
  const app = await definition.build({ settings, store, logger: pino({ level: 'silent' }), version: VERSION });
  await app.ready();
  return {
    app,
    store,
    database,
    settings,
    async close() {
      await app.close();
      await store.close();
      await database.cleanup();
    },
  };
}

/** The identity header the gateway would inject for this user. */
export function asUser(id: string, extra: Record<string, unknown> = {}): Record<string, string> {
  return { 'x-gateway-authentication': JSON.stringify({ user: { id }, ...extra }) };
}
