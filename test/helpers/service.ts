import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { loadSettings, type Settings } from '../../src/config.ts';
import type { ServiceApp } from '../../src/core/app.ts';
import type { ServiceDefinition } from '../../src/services/context.ts';
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
export async function startTestService(
  definition: ServiceDefinition,
  overrides: Partial<Settings> = {},
): Promise<TestService> {
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

/** One in-process request; an object payload is sent as JSON, a string or Buffer as is. */
export function call(
  service: TestService,
  method: string,
  url: string,
  headers: Record<string, string> = {},
  payload?: string | Buffer | object,
): Promise<LightMyRequestResponse> {
  const body =
    payload === undefined
      ? undefined
      : typeof payload === 'string' || Buffer.isBuffer(payload)
        ? payload
        : JSON.stringify(payload);
  return service.app.inject({
    method: method as 'GET',
    url,
    headers,
    ...(body === undefined ? {} : { payload: body }),
  });
}

/**
 * In-process requests to one app with JSON bodies: a payload that is not a string is sent as JSON,
 * and any payload with `Content-Type: application/json` unless the headers name one.
 */
export function jsonCaller(
  app: ServiceApp,
): (
  method: string,
  url: string,
  headers?: Record<string, string>,
  payload?: unknown,
) => Promise<LightMyRequestResponse> {
  return (method, url, headers = {}, payload) =>
    app.inject({
      method: method as 'GET',
      url,
      headers: payload === undefined ? headers : { 'content-type': 'application/json', ...headers },
      payload: payload === undefined ? undefined : typeof payload === 'string' ? payload : JSON.stringify(payload),
    });
}

/** The JSON body of a response that must have `status` (200 by default). */
export function jsonOf<T>(response: LightMyRequestResponse, status = 200): T {
  assert.equal(response.statusCode, status, `expected ${status}, got ${response.statusCode}: ${response.body}`);
  return response.json<T>();
}
