import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { configService } from '../../../src/services/config/index.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';

describe('config service: v1 user config', () => {
  let service: TestService;
  before(async () => {
    service = await startTestService(configService);
  });
  after(async () => {
    await service.close();
  });

  const call = (method: 'GET' | 'PATCH', headers: Record<string, string>, payload?: unknown) =>
    service.app.inject({
      method,
      url: '/v1/config',
      headers: { 'content-type': 'application/json', ...headers },
      payload: payload === undefined ? undefined : typeof payload === 'string' ? payload : JSON.stringify(payload),
    });

  it('gives a new user an empty map', async () => {
    const res = await call('GET', asUser('user-new'));
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { entries: {} });
  });

  it('follows the reference example', async () => {
    const ada = asUser('user-ada');
    let res = await call('PATCH', ada, { entries: { 'feature.newCheckout': true, 'database.host': 'db.example.com' } });
    assert.deepEqual(res.json(), { entries: { 'feature.newCheckout': true, 'database.host': 'db.example.com' } });
    res = await call('PATCH', ada, { entries: { 'feature.newCheckout': false } });
    assert.deepEqual(res.json(), { entries: { 'feature.newCheckout': false, 'database.host': 'db.example.com' } });
    res = await call('PATCH', ada, { 'database.url': 'postgres://prod:5432/db', 'database.host': null });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), {
      entries: { 'feature.newCheckout': false, 'database.url': 'postgres://prod:5432/db' },
    });
    assert.deepEqual((await call('GET', ada)).json(), res.json());
  });

  it('keeps users apart', async () => {
    await call('PATCH', asUser('user-a'), { secret: 'a' });
    assert.deepEqual((await call('GET', asUser('user-b'))).json(), { entries: {} });
  });

  it('answers 401 without a usable identity', async () => {
    const headers: Record<string, string>[] = [
      {},
      { 'x-gateway-authentication': 'not json' },
      { 'x-gateway-authentication': '{"user":{}}' },
      { 'x-gateway-authentication': '{"user":{"id":5}}' },
      { 'x-gateway-authentication': '["user"]' },
    ];
    for (const h of headers) {
      for (const method of ['GET', 'PATCH'] as const) {
        const res = await call(method, h, method === 'PATCH' ? { a: 1 } : undefined);
        assert.equal(res.statusCode, 401, `${method} ${JSON.stringify(h)}`);
        assert.equal(res.json().error.code, 'unauthorized');
      }
    }
  });

  it('rejects a non-object patch and changes nothing', async () => {
    const u = asUser('user-c');
    await call('PATCH', u, { keep: 1 });
    for (const payload of ['[]', '1', '{oops']) assert.equal((await call('PATCH', u, payload)).statusCode, 400);
    assert.deepEqual((await call('GET', u)).json(), { entries: { keep: 1 } });
  });

  it('serializes concurrent first patches of one user', async () => {
    const u = asUser('user-race');
    await Promise.all(Array.from({ length: 30 }, (_, i) => call('PATCH', u, { [`k${i}`]: i })));
    assert.equal(Object.keys((await call('GET', u)).json().entries).length, 30);
  });
});
