import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';

export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Asserts the error envelope (`{"error":{status,code,message}}`, JSON) and returns its message. */
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
