import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestService } from '../../helpers/service.ts';
import {
  as,
  assertError,
  call,
  createKey,
  createLogger,
  jsonOf,
  startLogs,
  UUID_V4,
  withKey,
  type LoggerBody,
} from './helpers.ts';

let service: TestService;
before(async () => {
  service = await startLogs();
});
after(async () => {
  await service.close();
});

describe('loggers', () => {
  test('create, list, get, delete', async () => {
    const created = await createLogger(service, 'alice', 'web');
    assert.match(created.id, UUID_V4);
    assert.deepEqual(
      { ...created, created_at: '' },
      { id: created.id, name: 'web', owners: ['alice'], api_keys: [], usage: { bytes: 0, lines: 0 }, created_at: '' },
    );
    const list = jsonOf<LoggerBody[]>(await call(service, 'GET', '/v1/loggers', as('alice')));
    assert.ok(list.some((l) => l.id === created.id));
    assert.deepEqual(jsonOf<LoggerBody[]>(await call(service, 'GET', '/v1/loggers', as('nobody'))), []);
    assert.equal(jsonOf<LoggerBody>(await call(service, 'GET', `/v1/loggers/${created.id}`, as('alice'))).name, 'web');
    const deleted = await call(service, 'DELETE', `/v1/loggers/${created.id}`, as('alice'));
    assert.equal(deleted.statusCode, 204);
    assert.equal(deleted.body, '');
    assertError(await call(service, 'GET', `/v1/loggers/${created.id}`, as('alice')), 404, 'not_found');
  });

  test('create errors: 401, invalid JSON, missing or bad name', async () => {
    assertError(await call(service, 'POST', '/v1/loggers', {}, { name: 'x' }), 401, 'unauthorized');
    assertError(
      await call(service, 'POST', '/v1/loggers', { 'x-gateway-authentication': 'nope' }, { name: 'x' }),
      401,
      'unauthorized',
    );
    assertError(await call(service, 'POST', '/v1/loggers', as('alice'), '{"name":'), 400, 'invalid_json');
    assertError(await call(service, 'POST', '/v1/loggers', as('alice'), {}), 400, 'validation_error');
    assertError(await call(service, 'POST', '/v1/loggers', as('alice'), { name: '' }), 400, 'validation_error');
    assertError(
      await call(service, 'POST', '/v1/loggers', as('alice'), { name: 'x'.repeat(201) }),
      400,
      'validation_error',
    );
    assertError(await call(service, 'GET', '/v1/loggers', {}), 401, 'unauthorized');
  });

  test('access rules: 401, 404, 403, keys', async () => {
    const logger = await createLogger(service, 'alice');
    const other = await createLogger(service, 'bob');
    const key = await createKey(service, logger.id, 'alice');
    const url = `/v1/loggers/${logger.id}`;
    assertError(await call(service, 'GET', url), 401, 'unauthorized');
    assertError(
      await call(service, 'GET', `/v1/loggers/00000000-0000-4000-8000-000000000000`, as('alice')),
      404,
      'not_found',
    );
    assertError(await call(service, 'GET', `/v1/loggers/not-a-uuid`, as('alice')), 404, 'not_found');
    assertError(await call(service, 'GET', url, as('bob')), 403, 'forbidden');
    assert.equal((await call(service, 'GET', url, withKey(key))).statusCode, 200);
    assertError(
      await call(service, 'GET', url, withKey({ key: key.key, secret: '00000000-0000-4000-8000-000000000000' })),
      401,
      'unauthorized',
    );
    assertError(await call(service, 'GET', url, { 'api-key': key.key }), 401, 'unauthorized');
    assertError(await call(service, 'GET', `/v1/loggers/${other.id}`, withKey(key)), 403, 'forbidden');
    assertError(await call(service, 'PUT', url, as('alice')), 405, 'method_not_allowed');
    assertError(await call(service, 'GET', '/v1/nothing', as('alice')), 404, 'not_found');
  });

  test('API keys: create shows the secret once, delete → 204 and stops the key', async () => {
    const logger = await createLogger(service, 'alice');
    const key = await createKey(service, logger.id, 'alice', 'deploy');
    assert.match(key.id, UUID_V4);
    assert.match(key.key, UUID_V4);
    assert.match(key.secret, UUID_V4);
    const got = jsonOf<LoggerBody>(await call(service, 'GET', `/v1/loggers/${logger.id}`, as('alice')));
    assert.deepEqual(got.api_keys, [{ id: key.id, name: 'deploy', created_at: key.created_at }]);
    assert.ok(!JSON.stringify(got).includes(key.secret));
    assertError(
      await call(service, 'POST', `/v1/loggers/${logger.id}/apiKeys`, as('alice'), {}),
      400,
      'validation_error',
    );
    assertError(
      await call(service, 'POST', `/v1/loggers/${logger.id}/apiKeys`, as('alice'), { name: '' }),
      400,
      'validation_error',
    );
    assertError(await call(service, 'DELETE', `/v1/loggers/${logger.id}/apiKeys/${key.id}`), 401, 'unauthorized');
    assertError(
      await call(service, 'DELETE', `/v1/loggers/${logger.id}/apiKeys/${key.id}`, as('bob')),
      403,
      'forbidden',
    );
    assertError(
      await call(
        service,
        'DELETE',
        `/v1/loggers/${logger.id}/apiKeys/00000000-0000-4000-8000-000000000000`,
        as('alice'),
      ),
      404,
      'not_found',
    );
    // A key may manage keys, itself included.
    const deleted = await call(service, 'DELETE', `/v1/loggers/${logger.id}/apiKeys/${key.id}`, withKey(key));
    assert.equal(deleted.statusCode, 204);
    assert.equal(deleted.body, '');
    assertError(await call(service, 'GET', `/v1/loggers/${logger.id}`, withKey(key)), 401, 'unauthorized');
  });

  test('owners: add, add again, remove, self-removal, non-owner, last owner', async () => {
    const logger = await createLogger(service, 'alice');
    const url = `/v1/loggers/${logger.id}/owners`;
    assert.deepEqual(jsonOf(await call(service, 'POST', url, as('alice'), { user_id: 'bob' })), ['alice', 'bob']);
    assert.deepEqual(jsonOf(await call(service, 'POST', url, as('alice'), { user_id: 'bob' })), ['alice', 'bob']);
    assertError(await call(service, 'POST', url, as('alice'), { user_id: '' }), 400, 'validation_error');
    assertError(await call(service, 'POST', url, as('alice'), {}), 400, 'validation_error');
    assertError(await call(service, 'DELETE', `${url}/alice`, as('alice')), 400, 'validation_error');
    assertError(await call(service, 'DELETE', `${url}/carol`, as('alice')), 404, 'not_found');
    assertError(await call(service, 'POST', url, {}, { user_id: 'mallory' }), 401, 'unauthorized');
    assertError(await call(service, 'POST', url, as('mallory'), { user_id: 'mallory' }), 403, 'forbidden');
    assertError(
      await call(service, 'POST', `/v1/loggers/00000000-0000-4000-8000-000000000000/owners`, as('alice'), {
        user_id: 'x',
      }),
      404,
      'not_found',
    );
    assertError(await call(service, 'DELETE', `${url}/bob`), 401, 'unauthorized');
    assertError(await call(service, 'DELETE', `${url}/bob`, as('carol')), 403, 'forbidden');
    assertError(
      await call(service, 'DELETE', `/v1/loggers/00000000-0000-4000-8000-000000000000/owners/bob`, as('alice')),
      404,
      'not_found',
    );
    assert.deepEqual(jsonOf(await call(service, 'DELETE', `${url}/alice`, as('bob'))), ['bob']);
    const key = await createKey(service, logger.id, 'bob');
    assertError(await call(service, 'DELETE', `${url}/bob`, withKey(key)), 400, 'validation_error');
    assert.deepEqual(jsonOf<LoggerBody>(await call(service, 'GET', `/v1/loggers/${logger.id}`, as('bob'))).owners, [
      'bob',
    ]);
  });

  test('/openapi.json lists every logs route with its method', async () => {
    const document = jsonOf<{ paths: Record<string, Record<string, unknown>> }>(
      await call(service, 'GET', '/openapi.json'),
    );
    const routes = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
    );
    for (const route of [
      'GET /v1/loggers',
      'POST /v1/loggers',
      'GET /v1/loggers/{id}',
      'DELETE /v1/loggers/{id}',
      'GET /v1/loggers/{id}/stats',
      'POST /v1/loggers/{id}/apiKeys',
      'DELETE /v1/loggers/{id}/apiKeys/{apiKey}',
      'POST /v1/loggers/{id}/owners',
      'DELETE /v1/loggers/{id}/owners/{ownerId}',
      'GET /v1/loggers/{id}/filter',
      'GET /v1/loggers/{id}/events',
      'POST /v1/loggers/{id}/ingest',
      'POST /v1/ingest/events',
    ]) {
      assert.ok(routes.includes(route), `${route} missing from ${routes.join(', ')}`);
    }
  });
});
