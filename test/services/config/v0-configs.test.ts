import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { configService } from '../../../src/services/config/index.ts';
import { startTestService, type TestService } from '../../helpers/service.ts';

describe('config service: v0 config objects', () => {
  let service: TestService;
  before(async () => {
    service = await startTestService(configService);
  });
  after(async () => {
    await service.close();
  });

  const inject = (
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE' | 'PUT',
    url: string,
    payload?: unknown,
    headers: Record<string, string> = {},
  ) =>
    service.app.inject({
      method,
      url,
      payload: payload === undefined ? undefined : typeof payload === 'string' ? payload : JSON.stringify(payload),
      headers: { 'content-type': 'application/json', ...headers },
    });

  it('lists nothing at first', async () => {
    const res = await inject('GET', '/v0/configs');
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), []);
  });

  it('creates with a generated UUID v4 id, drops null entries, and gets it back', async () => {
    const res = await inject('POST', '/v0/configs', {
      entries: { 'feature.newCheckout': true, gone: null, nested: { a: [1, 2] } },
    });
    assert.equal(res.statusCode, 201);
    const body = res.json();
    assert.match(body.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.deepEqual(body.entries, { 'feature.newCheckout': true, nested: { a: [1, 2] } });
    const got = await inject('GET', `/v0/configs/${body.id}`);
    assert.equal(got.statusCode, 200);
    assert.deepEqual(got.json(), body);
  });

  it('creates with a client id and no entries', async () => {
    const res = await inject('POST', '/v0/configs', { id: 'app.settings_v2-1' });
    assert.equal(res.statusCode, 201);
    assert.deepEqual(res.json(), { id: 'app.settings_v2-1', entries: {} });
  });

  it('rejects a duplicate id with 409 and keeps the original', async () => {
    await inject('POST', '/v0/configs', { id: 'dup', entries: { a: 1 } });
    const res = await inject('POST', '/v0/configs', { id: 'dup', entries: { a: 2 } });
    assert.equal(res.statusCode, 409);
    assert.equal(res.json().error.code, 'conflict');
    assert.deepEqual((await inject('GET', '/v0/configs/dup')).json().entries, { a: 1 });
  });

  it('lists in creation order', async () => {
    for (const id of ['order-b', 'order-a', 'order-c']) await inject('POST', '/v0/configs', { id });
    const ids = (await inject('GET', '/v0/configs'))
      .json()
      .map((c: { id: string }) => c.id)
      .filter((id: string) => id.startsWith('order-'));
    assert.deepEqual(ids, ['order-b', 'order-a', 'order-c']);
  });

  it('rejects bad bodies with 400 envelopes and creates nothing', async () => {
    const before = (await inject('GET', '/v0/configs')).json().length;
    const cases: [unknown, string][] = [
      ['{"id": "x",', 'invalid_json'],
      [{ entries: 'nope' }, 'validation_error'],
      [{ entries: [1] }, 'validation_error'],
      [{ id: 7 }, 'validation_error'],
      [{ id: '' }, 'validation_error'],
      [{ id: 'has space' }, 'validation_error'],
      [{ id: 'a'.repeat(129) }, 'validation_error'],
      [{ 'feature.flat': true }, 'validation_error'],
      [[1, 2], 'validation_error'],
      ['"text"', 'validation_error'],
    ];
    for (const [payload, code] of cases) {
      const res = await inject('POST', '/v0/configs', payload);
      assert.equal(res.statusCode, 400, `payload ${JSON.stringify(payload)}`);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      const body = res.json();
      assert.equal(body.error.status, 400);
      assert.equal(body.error.code, code, `payload ${JSON.stringify(payload)}: ${body.error.message}`);
      assert.equal(typeof body.error.message, 'string');
    }
    assert.equal((await inject('GET', '/v0/configs')).json().length, before);
  });

  it('parses JSON whatever the Content-Type', async () => {
    const res = await service.app.inject({
      method: 'POST',
      url: '/v0/configs',
      payload: '{"id":"form-sent","entries":{"k":"v"}}',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(res.statusCode, 201);
    const plain = await service.app.inject({
      method: 'POST',
      url: '/v0/configs',
      payload: '{"id":"text-sent"}',
      headers: { 'content-type': 'text/plain' },
    });
    assert.equal(plain.statusCode, 201);
  });

  it('answers 413 for a body over 10 MiB and stores nothing', async () => {
    const big = JSON.stringify({ id: 'too-big', entries: { blob: 'x'.repeat(10 * 1024 * 1024 + 10) } });
    const res = await service.app.inject({
      method: 'POST',
      url: '/v0/configs',
      payload: big,
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(res.statusCode, 413);
    assert.equal(res.json().error.code, 'payload_too_large');
    assert.equal((await inject('GET', '/v0/configs/too-big')).statusCode, 404);
  });

  it('patches in the wrapped and the flat form, null deletes, nested values are replaced whole', async () => {
    await inject('POST', '/v0/configs', { id: 'p1', entries: { a: 1, b: 2, db: { host: 'h', port: 1 } } });
    let res = await inject('PATCH', '/v0/configs/p1', { entries: { a: 10, db: { port: 5432 } } });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { id: 'p1', entries: { a: 10, b: 2, db: { port: 5432 } } });
    res = await inject('PATCH', '/v0/configs/p1', { c: 'x', b: null, missing: null });
    assert.deepEqual(res.json(), { id: 'p1', entries: { a: 10, db: { port: 5432 }, c: 'x' } });
    // Two members, one of them `entries`: the flat form, so `entries` is an ordinary key.
    res = await inject('PATCH', '/v0/configs/p1', { entries: { z: 1 }, d: 4 });
    assert.deepEqual(res.json().entries, { a: 10, db: { port: 5432 }, c: 'x', entries: { z: 1 }, d: 4 });
    assert.deepEqual((await inject('GET', '/v0/configs/p1')).json(), res.json());
  });

  it('treats an empty patch as a no-op that returns the current state', async () => {
    await inject('POST', '/v0/configs', { id: 'p-empty', entries: { a: 1 } });
    for (const body of [{}, { entries: {} }]) {
      const res = await inject('PATCH', '/v0/configs/p-empty', body);
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), { id: 'p-empty', entries: { a: 1 } });
    }
  });

  it('keeps a __proto__ key as an ordinary entry', async () => {
    await inject('POST', '/v0/configs', { id: 'proto' });
    const res = await inject('PATCH', '/v0/configs/proto', '{"__proto__":{"polluted":true},"ok":1}');
    assert.equal(res.statusCode, 200);
    assert.equal(res.body, '{"id":"proto","entries":{"__proto__":{"polluted":true},"ok":1}}');
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  it('rejects non-object patches and unknown ids, changing nothing', async () => {
    await inject('POST', '/v0/configs', { id: 'p2', entries: { a: 1 } });
    for (const payload of ['[1]', '"s"', '3', 'null', '{bad']) {
      const res = await inject('PATCH', '/v0/configs/p2', payload);
      assert.equal(res.statusCode, 400, payload);
    }
    assert.deepEqual((await inject('GET', '/v0/configs/p2')).json().entries, { a: 1 });
    const missing = await inject('PATCH', '/v0/configs/nope', { a: 1 });
    assert.equal(missing.statusCode, 404);
    assert.equal(missing.json().error.code, 'not_found');
    assert.equal((await inject('GET', '/v0/configs/nope')).statusCode, 404, 'a patch never creates an object');
  });

  it('serializes concurrent patches of different keys so that all survive', async () => {
    await inject('POST', '/v0/configs', { id: 'race' });
    await Promise.all(Array.from({ length: 40 }, (_, i) => inject('PATCH', '/v0/configs/race', { [`k${i}`]: i })));
    const entries = (await inject('GET', '/v0/configs/race')).json().entries;
    assert.equal(Object.keys(entries).length, 40);
  });

  it('deletes with 204 and 404 the second time', async () => {
    await inject('POST', '/v0/configs', { id: 'del' });
    const res = await inject('DELETE', '/v0/configs/del');
    assert.equal(res.statusCode, 204);
    assert.equal(res.body, '');
    assert.equal((await inject('DELETE', '/v0/configs/del')).statusCode, 404);
    assert.equal((await inject('GET', '/v0/configs/del')).statusCode, 404);
  });

  it('answers 404 not_found for unknown paths and 405 for a known path with another method', async () => {
    const unknown = await inject('GET', '/v0/nothing');
    assert.equal(unknown.statusCode, 404);
    assert.equal(unknown.json().error.code, 'not_found');
    const wrong = await inject('PUT', '/v0/configs/x', { a: 1 });
    assert.equal(wrong.statusCode, 405);
    assert.equal(wrong.json().error.code, 'method_not_allowed');
    assert.match(String(wrong.headers.allow), /PATCH/);
    const wrongList = await inject('DELETE', '/v0/configs');
    assert.equal(wrongList.statusCode, 405);
  });

  it('serves /version as plain text and an OpenAPI document with only its own paths', async () => {
    const version = await service.app.inject({ method: 'GET', url: '/version' });
    assert.equal(version.statusCode, 200);
    assert.match(String(version.headers['content-type']), /^text\/plain/);
    assert.match(version.body, /^\d+\.\d+\.\d+/);
    const doc = (await service.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    assert.equal(doc.openapi, '3.0.3');
    assert.deepEqual(Object.keys(doc.paths).sort(), ['/v0/configs', '/v0/configs/{id}', '/v1/config', '/version']);
    assert.ok(doc.paths['/v0/configs'].post.requestBody);
    assert.ok(doc.paths['/v1/config'].patch);
  });
});
