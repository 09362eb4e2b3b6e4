import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { assertError } from '../../helpers/envelope.ts';
import { AUTH, dataDirs, startNode, type KvNodeHandle } from './helpers.ts';

const dirs = dataDirs();
let node: KvNodeHandle;

before(async () => {
  node = await startNode({ dataDir: dirs.make(), name: 'node-1', listen: false });
});
after(async () => {
  await node.stop();
  await dirs.cleanup();
});

function call(
  method: string,
  url: string,
  body?: string | object,
  headers: Record<string, string> = AUTH,
): Promise<LightMyRequestResponse> {
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  return node.app.inject({ method: method as 'GET', url, headers, ...(payload === undefined ? {} : { payload }) });
}

function ok<T>(response: LightMyRequestResponse, status = 200): T {
  assert.equal(response.statusCode, status, response.body);
  return response.json<T>();
}

describe('health', () => {
  it('livez, healthz and startupz name the node and role; readyz is ready on a primary', async () => {
    for (const path of ['/livez', '/healthz', '/startupz'])
      assert.deepEqual(ok(await call('GET', path, undefined, {})), { ok: true, node: 'node-1', role: 'primary' });
    assert.deepEqual(ok(await call('GET', '/readyz', undefined, {})), {
      ok: true,
      node: 'node-1',
      role: 'primary',
      ready: true,
      status: 'ok',
      parent_connected: true,
      checks: { wal_replayed: true, parent_connected: true },
    });
  });

  it('serves an OpenAPI document listing the /v1 routes', async () => {
    const document = ok<{ paths: Record<string, unknown> }>(await call('GET', '/openapi.json', undefined, {}));
    for (const path of [
      '/v1/status',
      '/v1/metrics',
      '/v1/collections',
      '/v1/collections/{col}',
      '/v1/collections/{col}/keys',
      '/v1/replicate',
    ])
      assert.ok(path in document.paths, path);
  });
});

describe('presence-only authentication', () => {
  it('accepts any one credential form and answers 403 forbidden without one', async () => {
    assertError(await call('GET', '/v1/collections', undefined, {}), 403, 'forbidden');
    assertError(await call('GET', '/v1/collections', undefined, { apikey: 'a' }), 403, 'forbidden');
    assertError(
      await call('GET', '/v1/collections', undefined, { 'api-key': 'a', 'api-secret': '' }),
      403,
      'forbidden',
    );
    assertError(await call('GET', '/v1/collections', undefined, { 'x-gateway-authentication': '' }), 403, 'forbidden');
    assertError(await call('POST', '/v1/replicate', undefined, {}), 403, 'forbidden');
    const forms: Record<string, string>[] = [
      AUTH,
      { apikey: 'a', secret: 'b' },
      { 'api-key': 'a', 'api-secret': 'b' },
      { 'x-gateway-authentication': 'not even json' },
    ];
    for (const headers of forms) {
      assert.equal((await call('GET', '/v1/collections', undefined, headers)).statusCode, 200);
    }
  });
});

describe('collections', () => {
  it('create (name or collection), list in creation order, create again is no change, delete', async () => {
    assert.deepEqual(ok(await call('POST', '/v1/collections', { name: 'users' })), { ok: true, collection: 'users' });
    assert.deepEqual(ok(await call('POST', '/v1/collections', { collection: 'sessions' })), {
      ok: true,
      collection: 'sessions',
    });
    assert.deepEqual(ok(await call('POST', '/v1/collections', { name: 'users', collection: 'ignored' })), {
      ok: true,
      collection: 'users',
    });
    assert.deepEqual(
      ok(await call('POST', '/v1/collections', '{"name":"carts"}', { ...AUTH, 'content-type': 'text/plain' })),
      { ok: true, collection: 'carts' },
    );
    assert.deepEqual(ok<{ collections: string[] }>(await call('GET', '/v1/collections')).collections.slice(0, 3), [
      'users',
      'sessions',
      'carts',
    ]);
    assert.deepEqual(ok(await call('DELETE', '/v1/collections/carts')), { ok: true, collection: 'carts' });
    assertError(await call('DELETE', '/v1/collections/carts'), 404, 'not_found');
    assert.ok(!ok<{ collections: string[] }>(await call('GET', '/v1/collections')).collections.includes('carts'));
  });

  it('rejects a missing name, bad JSON and bad names', async () => {
    assertError(await call('POST', '/v1/collections', {}), 400, 'missing_collection');
    assertError(await call('POST', '/v1/collections', { name: '' }), 400, 'missing_collection');
    assertError(await call('POST', '/v1/collections'), 400, 'missing_collection');
    assertError(await call('POST', '/v1/collections', '{"name":'), 400, 'invalid_json');
    assertError(await call('POST', '/v1/collections', '[1]'), 400, 'invalid_json');
    assertError(await call('POST', '/v1/collections', { name: 'a/b' }), 400, 'validation_error');
    assertError(await call('POST', '/v1/collections', { name: 'x'.repeat(129) }), 400, 'validation_error');
    assertError(await call('POST', '/v1/collections', { name: 5 }), 400, 'validation_error');
    assertError(await call('PUT', '/v1/collections'), 405, 'method_not_allowed');
    assertError(await call('GET', '/v1/nothing'), 404, 'not_found');
  });

  it('deleting a collection removes its keys', async () => {
    ok(await call('POST', '/v1/collections', { name: 'temp' }));
    ok(await call('POST', '/v1/collections/temp/keys/a', { value: 1 }));
    ok(await call('DELETE', '/v1/collections/temp'));
    ok(await call('POST', '/v1/collections', { name: 'temp' }));
    assertError(await call('GET', '/v1/collections/temp/keys/a'), 404, 'not_found');
  });
});

describe('keys', () => {
  before(async () => {
    ok(await call('POST', '/v1/collections', { name: 'keys' }));
  });

  it('set → seq and version, get, delete; versions continue after a delete; seq is node-wide', async () => {
    const first = ok<{ ok: boolean; seq: number; version: number }>(
      await call('POST', '/v1/collections/keys/keys/user:alice', { value: { role: 'admin' } }),
    );
    assert.equal(first.ok, true);
    assert.equal(first.version, 1);
    const second = ok<{ seq: number; version: number }>(
      await call('POST', '/v1/collections/keys/keys/user:alice', { value: { role: 'user' } }),
    );
    assert.deepEqual(second, { ok: true, seq: first.seq + 1, version: 2 });
    const got = ok<{ key: string; value: unknown; version: number; updatedAt: string }>(
      await call('GET', '/v1/collections/keys/keys/user:alice'),
    );
    assert.deepEqual(
      { ...got, updatedAt: '' },
      { key: 'user:alice', value: { role: 'user' }, version: 2, updatedAt: '' },
    );
    assert.match(got.updatedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.deepEqual(ok(await call('DELETE', '/v1/collections/keys/keys/user:alice')), {
      ok: true,
      seq: first.seq + 2,
      version: 3,
    });
    assertError(await call('GET', '/v1/collections/keys/keys/user:alice'), 404, 'not_found');
    assertError(await call('DELETE', '/v1/collections/keys/keys/user:alice'), 404, 'not_found');
    assert.deepEqual(ok(await call('POST', '/v1/collections/keys/keys/user:alice', { value: 'back' })), {
      ok: true,
      seq: first.seq + 3,
      version: 4,
    });
  });

  it('values round-trip exactly, null and big integers included', async () => {
    const values = [null, true, 0, -1.5, 'text', [1, [2]], { nested: { deep: [null] } }];
    for (const [i, value] of values.entries()) {
      ok(await call('POST', `/v1/collections/keys/keys/v${i}`, { value }));
      assert.deepEqual(ok<{ value: unknown }>(await call('GET', `/v1/collections/keys/keys/v${i}`)).value, value);
    }
    ok(await call('POST', '/v1/collections/keys/keys/big', '{"value":{"n":123456789012345678901234567890}}'));
    assert.match(
      (await call('GET', '/v1/collections/keys/keys/big')).body,
      /"value":\{"n":123456789012345678901234567890\}/,
    );
  });

  it('keys are the rest of the path, slashes and encoded characters included', async () => {
    ok(await call('POST', '/v1/collections/keys/keys/a/b/c', { value: 'slashes' }));
    ok(await call('POST', `/v1/collections/keys/keys/${encodeURIComponent('q?#%')}`, { value: 'encoded' }));
    assert.equal(ok<{ key: string }>(await call('GET', '/v1/collections/keys/keys/a/b/c')).key, 'a/b/c');
    assert.equal(
      ok<{ key: string; value: string }>(await call('GET', `/v1/collections/keys/keys/${encodeURIComponent('q?#%')}`))
        .value,
      'encoded',
    );
    assertError(await call('POST', '/v1/collections/keys/keys/', { value: 1 }), 400, 'invalid_key');
  });

  it('write errors: bad bodies, missing collections, unknown keys', async () => {
    assertError(await call('POST', '/v1/collections/keys/keys/x', { other: 1 }), 400, 'invalid_json');
    assertError(await call('POST', '/v1/collections/keys/keys/x', '[1]'), 400, 'invalid_json');
    assertError(await call('POST', '/v1/collections/keys/keys/x', '{"value":'), 400, 'invalid_json');
    assertError(await call('POST', '/v1/collections/keys/keys/x'), 400, 'invalid_json');
    assertError(await call('POST', '/v1/collections/nope/keys/x', { value: 1 }), 404, 'missing_collection');
    assertError(await call('DELETE', '/v1/collections/nope/keys/x'), 404, 'missing_collection');
    assertError(await call('GET', '/v1/collections/nope/keys/x'), 404, 'not_found');
    assertError(await call('GET', '/v1/collections/keys/keys/never'), 404, 'not_found');
    assertError(
      await call('POST', '/v1/collections/keys/keys/huge', `{"value":"${'x'.repeat(11 * 1024 * 1024)}"}`),
      413,
      'payload_too_large',
    );
  });

  it('lists in code-point order with prefix, limit, after and next', async () => {
    ok(await call('POST', '/v1/collections', { name: 'listing' }));
    for (const key of ['user:1002', 'user:1000', 'user:1001', 'admin', 'user:\u{1F600}', 'user:\uFFFF'])
      ok(await call('POST', `/v1/collections/listing/keys/${encodeURIComponent(key)}`, { value: key }));
    ok(await call('DELETE', '/v1/collections/listing/keys/user:1001'));
    const all = ok<{ items: { key: string }[]; next: string | null }>(
      await call('GET', '/v1/collections/listing/keys'),
    );
    // Code-point order puts U+FFFF before U+1F600 (UTF-16 order would not).
    assert.deepEqual(
      all.items.map((i) => i.key),
      ['admin', 'user:1000', 'user:1002', 'user:\uFFFF', 'user:\u{1F600}'],
    );
    assert.equal(all.next, null);
    const page = ok<{
      items: { key: string; value: string; version: number; updatedAt: string }[];
      next: string | null;
    }>(await call('GET', '/v1/collections/listing/keys?prefix=user:&limit=2'));
    assert.deepEqual(
      page.items.map((i) => i.key),
      ['user:1000', 'user:1002'],
    );
    assert.equal(page.items[0]?.value, 'user:1000');
    assert.equal(page.next, 'user:1002');
    const rest = ok<{ items: { key: string }[]; next: string | null }>(
      await call('GET', `/v1/collections/listing/keys?prefix=user:&limit=2&after=${encodeURIComponent(page.next!)}`),
    );
    assert.deepEqual(
      rest.items.map((i) => i.key),
      ['user:\uFFFF', 'user:\u{1F600}'],
    );
    assert.equal(rest.next, null);
    for (const limit of ['0', '-1', 'x', '1.5', '1001'])
      assertError(await call('GET', `/v1/collections/listing/keys?limit=${limit}`), 400, 'validation_error');
    assertError(await call('GET', '/v1/collections/nope/keys'), 404, 'not_found');
  });
});

describe('projects', () => {
  it('each project has its own collections; bad project ids are 400', async () => {
    ok(await call('POST', '/v1/collections', { name: 'shared-name' }, { ...AUTH, 'x-project-id': 'p1' }));
    ok(await call('POST', '/v1/collections/shared-name/keys/k', { value: 'p1' }, { ...AUTH, 'x-project-id': 'p1' }));
    assertError(await call('GET', '/v1/collections/shared-name/keys/k'), 404, 'not_found');
    const viaIdentity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'u' }, project: { id: 'p1' } }) };
    assert.equal(
      ok<{ value: string }>(await call('GET', '/v1/collections/shared-name/keys/k', undefined, viaIdentity)).value,
      'p1',
    );
    assertError(
      await call('GET', '/v1/collections', undefined, { ...AUTH, 'x-project-id': 'bad id!' }),
      400,
      'invalid_project',
    );
  });
});

describe('status and metrics', () => {
  it('report the node, its collections and counters', async () => {
    const status = ok<{
      node: string;
      role: string;
      parent: string;
      children: number;
      collections: Record<string, { keys: number; lastSeq: number }>;
      replication: { parent_connected: boolean };
    }>(await call('GET', '/v1/status'));
    assert.equal(status.node, 'node-1');
    assert.equal(status.role, 'primary');
    assert.equal(status.parent, '');
    assert.equal(status.children, 0);
    assert.ok(status.collections.keys!.keys >= 1);
    assert.ok(status.collections.keys!.lastSeq >= 1);
    const metrics = ok<Record<string, number | boolean>>(await call('GET', '/v1/metrics'));
    assert.deepEqual(
      Object.keys(metrics).sort(),
      [
        'children_connected',
        'collections',
        'keys_total',
        'parent_connected',
        'reads_total',
        'replication_commands_received_total',
        'replication_commands_sent_total',
        'uptime_seconds',
        'writes_total',
      ].sort(),
    );
    assert.ok((metrics.writes_total as number) > 5);
    assert.ok((metrics.reads_total as number) > 5);
    assert.equal(metrics.parent_connected, true);
    assertError(await call('GET', '/v1/status', undefined, {}), 403, 'forbidden');
  });
});
