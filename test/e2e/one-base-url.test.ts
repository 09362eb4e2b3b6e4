import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PLATFORM_HOSTS } from '../../src/core/host.ts';
import { VERSION } from '../../src/core/version.ts';
import type { OpenApiDocument } from '../../src/core/openapi.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const EMAIL = 'one-base@example.com';
const PASSWORD = 'correct horse battery staple';

/** The whole platform through one base URL (root README.md, One base URL): no service host names. */
describe('one base URL: every service under /services/<name> on the front door', () => {
  let t: TestPlatform;
  let bearer: Record<string, string>;
  /** A request to the front door as a Node client makes it: Host is the address it dialled. */
  const front = (method: string, path: string, body?: string, headers: Record<string, string> = {}) =>
    t.call({ method, path, host: `127.0.0.1:${t.platform.publicPort}`, headers: { ...bearer, ...headers }, body });

  before(async () => {
    t = await startTestPlatform({ adminEmail: EMAIL, adminPassword: PASSWORD });
    bearer = {};
    const login = await front('POST', '/services/auth/v0/login', JSON.stringify({ email: EMAIL, password: PASSWORD }), {
      'content-type': 'application/json',
    });
    assert.equal(login.status, 200, login.text);
    assert.equal(login.headers['set-cookie'], undefined);
    bearer = { authorization: `Bearer ${login.json<{ token: string }>().token}` };
  });
  after(async () => {
    await t?.close();
  });

  it('reaches the services by path alone: auth, apikeys, docdb, kv, files, gateway', async () => {
    const json = { 'content-type': 'application/json' };
    assert.equal((await front('GET', '/services/auth/v0/me')).json<{ email: string }>().email, EMAIL);
    const key = await front('POST', '/services/apikeys/v0/apikeys', '{"name":"one base"}', json);
    assert.equal(key.status, 201, key.text);

    const db = await front('POST', '/services/docdb/v1/databases', '{"name":"one"}', json);
    assert.equal(db.status, 201, db.text);
    const dbId = db.json<{ id: string }>().id;
    const inserted = await front(
      'POST',
      `/services/docdb/v1/databases/${dbId}/collections/items:insert`,
      '{"sku":"a"}\n{"sku":"b"}',
    );
    assert.equal(inserted.status, 201, inserted.text);

    assert.equal((await front('POST', '/services/kv/v1/collections', '{"name":"prefs"}', json)).status, 200);
    assert.equal(
      (await front('POST', '/services/kv/v1/collections/prefs/keys/theme', '{"value":"dark"}', json)).status,
      200,
    );
    const theme = await front('GET', '/services/kv/v1/collections/prefs/keys/theme');
    assert.equal(theme.json<{ value: unknown }>().value, 'dark');

    const bucket = await front('POST', '/services/files/v1/buckets', '{"name":"one"}', json);
    assert.equal(bucket.status, 201, bucket.text);
    const bucketId = bucket.json<{ id: string }>().id;
    const put = await front('PUT', `/services/files/v1/buckets/${bucketId}/files/a/b.txt`, 'hello', {
      'content-type': 'text/plain',
    });
    assert.equal(put.status, 201, put.text);
    const got = await front('GET', `/services/files/v1/buckets/${bucketId}/files/a/b.txt`);
    assert.equal(got.text, 'hello');

    assert.equal((await front('GET', '/services/gateway/v0/secret')).status, 200);
    assert.equal((await front('GET', '/services/gateway/version')).text, VERSION);
  });

  it('serves the merged platform document at /openapi.json on the front door', async () => {
    for (const host of [`127.0.0.1:${t.platform.publicPort}`, 'localhost', 'api.localhost']) {
      const res = await t.call({ path: '/openapi.json', host });
      assert.equal(res.status, 200);
      const doc = res.json<OpenApiDocument>();
      assert.equal(doc.info.title, 'Stratus platform');
      assert.doesNotMatch(String(doc.info.description), /Not running/, 'every service is described');
      assert.deepEqual(
        doc.servers?.map((s) => s.url),
        ['/'],
      );
      const paths = Object.keys(doc.paths ?? {});
      assert.ok(
        paths.every((p) => p.startsWith('/services/')),
        'every path under its service',
      );
      for (const service of PLATFORM_HOSTS.filter((host) => host !== 'api'))
        assert.ok(
          paths.some((p) => p.startsWith(`/services/${service}/`)),
          `${service} is described`,
        );
      assert.ok(paths.includes('/services/docdb/v1/databases'));
      assert.ok(paths.includes('/services/gateway/version'));
    }
  });

  it("keeps the gateway's own document on gateway.<domain> and under /services/gateway", async () => {
    for (const [host, path] of [
      ['gateway.localhost', '/openapi.json'],
      ['localhost', '/services/gateway/openapi.json'],
    ] as const) {
      const doc = (await t.call({ path, host })).json<OpenApiDocument>();
      assert.equal(doc.info.title, 'Stratus API Gateway', `${host}${path}`);
      assert.ok(Object.keys(doc.paths ?? {}).includes('/version'));
    }
  });
});
