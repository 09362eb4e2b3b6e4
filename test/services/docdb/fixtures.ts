// Shared fixtures for the collection, document, index, query and streaming tests: a docdb service
// on an isolated database with one database created through the API, and small request helpers.
import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { docdbService } from '../../../src/services/docdb/index.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';

export interface Env {
  service: TestService;
  user: string;
  headers: Record<string, string>;
  databaseId: string;
  /** `/v1/databases/{databaseId}/collections` */
  C: string;
}

/**
 * `startEnv` before the file's (or suite's) tests and its close after them; the object is filled
 * in when `before` runs, so tests read it as they would the value `startEnv` returns.
 */
export function useEnv(user?: string): Env {
  const env = {} as Env;
  before(async () => {
    Object.assign(env, await startEnv(user));
  });
  after(async () => {
    await env.service.close();
  });
  return env;
}

export type Body = string | object | undefined;

/** A docdb service with one database owned by a fresh user. */
export async function startEnv(user = 'user-1'): Promise<Env> {
  const service = await startTestService(docdbService);
  const headers = asUser(user);
  const created = await service.app.inject({
    method: 'POST',
    url: '/v1/databases',
    headers: { ...headers, 'content-type': 'application/json' },
    payload: JSON.stringify({ name: 'db' }),
  });
  assert.equal(created.statusCode, 201, created.body);
  const databaseId = (created.json() as { id: string }).id;
  return { service, user, headers, databaseId, C: `/v1/databases/${databaseId}/collections` };
}

/**
 * One request as the database's owner. Paths starting with `/` are absolute, `''` is `$C`, others
 * are relative to `$C/`. An object body is sent as JSON, a string as it is, undefined as no body.
 */
export function request(
  env: Env,
  method: string,
  path: string,
  body?: Body,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  const url = path === '' ? env.C : path.startsWith('/') ? path : `${env.C}/${path}`;
  return env.service.app.inject({
    method: method as 'GET',
    url,
    headers: {
      ...env.headers,
      ...(body !== undefined && !('content-type' in headers) ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    ...(body !== undefined ? { payload: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
  });
}

export const post = (env: Env, path: string, body?: Body, headers?: Record<string, string>) =>
  request(env, 'POST', path, body, headers);
export const get = (env: Env, path: string) => request(env, 'GET', path);

/** The lines of an NDJSON body (each must end with `\n`), parsed. */
export function parseLines(text: string): unknown[] {
  if (text === '') return [];
  assert.ok(text.endsWith('\n'), `NDJSON body must end with a line break: ${JSON.stringify(text.slice(-80))}`);
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line) as unknown);
}

/** Asserts an NDJSON answer (status, JSON content type) and returns its parsed lines. */
export function linesOf(response: LightMyRequestResponse, status = 200): Record<string, unknown>[] {
  assert.equal(
    response.statusCode,
    status,
    `expected ${status}, got ${response.statusCode}: ${response.body.slice(0, 500)}`,
  );
  if (response.body !== '') assert.match(String(response.headers['content-type']), /^application\/json/);
  return parseLines(response.body) as Record<string, unknown>[];
}

/** Asserts a single JSON answer and returns it parsed. */
export function jsonOf<T = Record<string, unknown>>(response: LightMyRequestResponse, status = 200): T {
  assert.equal(
    response.statusCode,
    status,
    `expected ${status}, got ${response.statusCode}: ${response.body.slice(0, 500)}`,
  );
  assert.match(String(response.headers['content-type']), /^application\/json/);
  assert.ok(response.body.endsWith('\n'), 'a single JSON body ends with a line break');
  return JSON.parse(response.body) as T;
}

/** Asserts the error envelope and returns its message. */
export function errorOf(response: LightMyRequestResponse, status: number, code: string): string {
  assert.equal(
    response.statusCode,
    status,
    `expected ${status} ${code}, got ${response.statusCode}: ${response.body.slice(0, 500)}`,
  );
  assert.match(String(response.headers['content-type']), /^application\/json/);
  const body = JSON.parse(response.body) as { error: { status: number; code: string; message: string } };
  assert.deepEqual(Object.keys(body), ['error']);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'status']);
  assert.equal(body.error.status, status);
  assert.equal(body.error.code, code);
  assert.ok(body.error.message.length > 0);
  return body.error.message;
}

/** Asserts that `line` is an error line with this status and code; returns its message. */
export function errorLine(line: unknown, status: number, code: string): string {
  const error = (line as { error?: { status: number; code: string; message: string } }).error;
  assert.ok(error, `expected an error line, got ${JSON.stringify(line)}`);
  assert.deepEqual(Object.keys(line as object), ['error']);
  assert.equal(error.status, status);
  assert.equal(error.code, code);
  assert.equal(typeof error.message, 'string');
  return error.message;
}

/** NDJSON text of documents. */
export const ndjson = (documents: readonly unknown[]): string =>
  documents.map((d) => `${JSON.stringify(d)}\n`).join('');

/** Inserts documents (201) and returns the stored ones. */
export async function insert(
  env: Env,
  collection: string,
  documents: readonly unknown[],
): Promise<Record<string, unknown>[]> {
  const lines = linesOf(await post(env, `${collection}:insert`, ndjson(documents)), 201);
  assert.equal(lines.length, documents.length);
  return lines;
}

/** Runs find (200) and returns the documents. */
export async function find(env: Env, collection: string, body: object = {}): Promise<Record<string, unknown>[]> {
  return linesOf(await post(env, `${collection}:find`, body));
}

/** The `id`s of documents. */
export const ids = (documents: readonly Record<string, unknown>[]): unknown[] => documents.map((d) => d.id);

/** Creates an index (201) and returns its record. */
export async function createIndex(env: Env, collection: string, definition: object): Promise<Record<string, unknown>> {
  return jsonOf(await post(env, `${collection}:createIndex`, definition), 201);
}

/** A collection with no defaults holding `documents`, inserted as given. */
export async function seed(env: Env, collection: string, documents: readonly unknown[]): Promise<void> {
  jsonOf(await post(env, '', { name: collection, defaults: {} }), 201);
  if (documents.length > 0) await insert(env, collection, documents);
}
