import type { DatabaseRecord } from '../../../src/services/docdb/repository/index.ts';
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { docdbService } from '../../../src/services/docdb/index.ts';
import { first } from '../../../src/store/sql-work.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';

export { assertError, UUID_V4 } from '../../helpers/envelope.ts';

/** The docdb service on an isolated database (SQLite file or PostgreSQL schema), ready for inject(). */
export function startDocdb(): Promise<TestService> {
  return startTestService(docdbService);
}

/** The identity header the gateway injects for `userId`. */
export function as(userId: string): Record<string, string> {
  return asUser(userId);
}

/** The headers that present a database API key. */
export function withKey(key: { key: string; secret: string }): Record<string, string> {
  return { 'api-key': key.key, 'api-secret': key.secret };
}

/** A database record as the API returns it (docdb.md §3.1). */
export type DatabaseBody = DatabaseRecord;

/** What `:createApiKey` returns (docdb.md §3.2). */
export interface CreatedKey {
  name: string;
  key: string;
  secret: string;
  creation_date: string;
}

export type Payload = string | object | undefined;

/**
 * One request. An object or array payload is sent as JSON, a string as it is (for malformed or
 * empty bodies), undefined as no body at all.
 */
export function call(
  service: TestService,
  method: string,
  url: string,
  headers: Record<string, string> = {},
  payload?: Payload,
): Promise<LightMyRequestResponse> {
  const withBody = payload !== undefined;
  return service.app.inject({
    method: method as 'GET',
    url,
    headers:
      withBody && typeof payload !== 'string' && !('content-type' in headers)
        ? { 'content-type': 'application/json', ...headers }
        : headers,
    ...(withBody ? { payload: typeof payload === 'string' ? payload : JSON.stringify(payload) } : {}),
  });
}

/**
 * Asserts a single-JSON success response (status, JSON content type, one value followed by a line
 * break, docdb.md §1.3) and returns the parsed value.
 */
export function jsonOf<T>(response: LightMyRequestResponse, status = 200): T {
  assert.equal(response.statusCode, status, `expected ${status}, got ${response.statusCode}: ${response.body}`);
  assert.match(String(response.headers['content-type']), /^application\/json/);
  assert.ok(response.body.endsWith('\n'), 'a single JSON body ends with a line break');
  return JSON.parse(response.body) as T;
}

/** Creates a database owned by `owner` through the API and returns its record. */
export async function createDatabase(service: TestService, owner: string, name = 'db'): Promise<DatabaseBody> {
  return jsonOf<DatabaseBody>(await call(service, 'POST', '/v1/databases', as(owner), { name }), 201);
}

/** Creates an API key of `databaseId` with the given credentials and returns it, secret included. */
export async function createApiKey(
  service: TestService,
  databaseId: string,
  credentials: Record<string, string>,
  name = 'key',
): Promise<CreatedKey> {
  return jsonOf<CreatedKey>(
    await call(service, 'POST', `/v1/databases/${databaseId}:createApiKey`, credentials, { name }),
    201,
  );
}

/** Reads a database record with the given credentials (asserting 200). */
export async function getDatabase(
  service: TestService,
  databaseId: string,
  credentials: Record<string, string>,
): Promise<DatabaseBody> {
  return jsonOf<DatabaseBody>(await call(service, 'GET', `/v1/databases/${databaseId}`, credentials));
}

/** Number of rows in one of docdb's tables, straight from the database. */
export async function countRows(
  service: TestService,
  table: string,
  where?: { column: string; value: string | number },
): Promise<number> {
  // `table` and `column` are constants of the tests, never input.
  const row = await service.store.sql.database.read(() =>
    where
      ? first<{ n: number }>(`select count(*) as n from ${table} where ${where.column} = ?`, where.value)
      : first<{ n: number }>(`select count(*) as n from ${table}`),
  );
  return Number(row?.n);
}

export { nextMessage } from '../../helpers/notifier.ts';
