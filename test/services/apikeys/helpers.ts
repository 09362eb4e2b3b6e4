import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import type { Store } from '../../../src/store/index.ts';
import type { TestService } from '../../helpers/service.ts';

export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Asserts the error envelope and returns its message. */
export function assertError(response: LightMyRequestResponse, status: number, code: string): string {
  assert.equal(response.statusCode, status, `expected ${status} ${code}, got ${response.statusCode}: ${response.body}`);
  assert.match(String(response.headers['content-type']), /^application\/json/);
  const body = response.json() as { error: { status: number; code: string; message: string } };
  assert.deepEqual(Object.keys(body), ['error']);
  assert.equal(body.error.status, status);
  assert.equal(body.error.code, code);
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  return body.error.message;
}

/** Number of rows in one of the service's tables, straight from the database. */
export async function countRows(service: TestService, table: 'apikeys_keys' | 'apikeys_projects' | 'apikeys_project_owners'): Promise<number> {
  const result = await sql<{ n: number | string }>`select count(*) as n from ${sql.table(table)}`.execute(service.store.sql.db);
  return Number(result.rows[0]?.n);
}

/**
 * Resolves with the first message on `topic` that `accept` takes; rejects after `timeoutMs`.
 * Subscribe before triggering the change.
 */
export function nextMessage(store: Store, topic: string, accept: (message: unknown) => boolean, timeoutMs = 3000): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      unsubscribe();
      reject(new Error(`no matching message on ${topic} within ${timeoutMs} ms`));
    }, timeoutMs);
    const unsubscribe = store.notifier.subscribe(topic, (text) => {
      const message: unknown = JSON.parse(text);
      if (!accept(message)) return;
      clearTimeout(timer);
      unsubscribe();
      resolve(message);
    });
  });
}
