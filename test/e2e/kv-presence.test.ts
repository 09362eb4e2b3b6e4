import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

// Decision 8 and contract rule 7: on the internal port the key-value node checks only that
// credentials are present (403 `forbidden` otherwise); on the public port the gateway verifies them.

const HOST = 'kv.localhost';
const ROUTES: [string, string, string?][] = [
  ['GET', '/v1/status'],
  ['GET', '/v1/metrics'],
  ['GET', '/v1/collections'],
  ['POST', '/v1/collections', '{"name":"presence"}'],
  ['GET', '/v1/collections/presence/keys'],
  ['POST', '/v1/collections/presence/keys/k', '{"value":1}'],
  ['GET', '/v1/collections/presence/keys/k'],
  ['DELETE', '/v1/collections/presence/keys/k'],
  ['DELETE', '/v1/collections/presence'],
];
const PRESENT: Record<string, Record<string, string>> = {
  'X-Gateway-Authentication': { 'x-gateway-authentication': 'anything' },
  'apikey + secret': { apikey: 'any', secret: 'values' },
  'Api-Key + Api-Secret': { 'api-key': 'any', 'api-secret': 'values' },
};
const ABSENT: Record<string, Record<string, string>> = {
  none: {},
  'apikey alone': { apikey: 'any' },
  'secret alone': { secret: 'any' },
  'Api-Key alone': { 'api-key': 'any' },
  'Api-Secret alone': { 'api-secret': 'any' },
  'apikey + Api-Secret (not a pair)': { apikey: 'any', 'api-secret': 'any' },
  'empty values': { apikey: '', secret: '' },
};

describe('key-value node: presence-only credentials on the internal port', () => {
  let t: TestPlatform;

  before(async () => {
    t = await startTestPlatform();
  });

  after(async () => {
    await t.close();
  });

  it('answers 403 forbidden on every /v1 route without a credential pair, and changes nothing', async () => {
    for (const [label, headers] of Object.entries(ABSENT)) {
      for (const [method, path, body] of ROUTES) {
        const res = await t.callInternal({ method, path, host: HOST, headers, ...(body ? { body } : {}) });
        assert.equal(res.status, 403, `${label}: ${method} ${path} → ${res.status} ${res.text}`);
        assert.equal(res.json<{ error: { code: string } }>().error.code, 'forbidden');
      }
    }
    const listed = await t.callInternal({ path: '/v1/collections', host: HOST, headers: PRESENT['apikey + secret']! });
    assert.deepEqual(listed.json(), { collections: [] });
  });

  for (const [label, headers] of Object.entries(PRESENT)) {
    it(`serves every route with ${label} present, whatever the values`, async () => {
      for (const [method, path, body] of ROUTES) {
        const res = await t.callInternal({ method, path, host: HOST, headers, ...(body ? { body } : {}) });
        assert.equal(res.status, 200, `${method} ${path} → ${res.status} ${res.text}`);
      }
    });
  }

  it('keeps the health checks public on both ports', async () => {
    for (const path of ['/healthz', '/livez', '/readyz', '/startupz']) {
      assert.equal((await t.callInternal({ path, host: HOST })).status, 200, `internal ${path}`);
      assert.equal((await t.call({ path, host: HOST })).status, 200, `public ${path}`);
    }
  });

  it('keeps `require` on the public port: presence is not enough there', async () => {
    for (const headers of [{}, PRESENT['apikey + secret']!, PRESENT['Api-Key + Api-Secret']!, PRESENT['X-Gateway-Authentication']!]) {
      const res = await t.call({ path: '/v1/collections', host: HOST, headers });
      assert.equal(res.status, 401, `${JSON.stringify(headers)} → ${res.status} ${res.text}`);
    }
  });
});
