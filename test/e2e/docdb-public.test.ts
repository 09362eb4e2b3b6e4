import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from '../helpers/http.ts';
import { usePlatform } from '../helpers/serve.ts';

const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'public-user' } }) };
const lines = (text: string) =>
  text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);

describe('docdb through the public port, as the README shows it', () => {
  const platform = usePlatform();

  it('works with a platform API key (owner identity) and with the database key, on docdb. and api. hosts', async () => {
    const platformKey = await request(platform.server.internalPort, {
      method: 'POST',
      path: '/v0/apikeys',
      host: 'apikeys.localhost',
      headers: identity,
      body: '{"name":"readme"}',
    });
    assert.equal(platformKey.status, 201);
    const { key, secret } = platformKey.json<{ key: string; secret: string }>();
    const owner = { 'api-key': key, 'api-secret': secret };

    // curl -d sends a form content type; docdb reads JSON whatever the Content-Type.
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const created = await request(platform.server.publicPort, {
      method: 'POST',
      path: '/v1/databases',
      host: 'docdb.localhost',
      headers: { ...owner, ...form },
      body: '{"name":"shop"}',
    });
    assert.equal(created.status, 201, created.text);
    const db = created.json<{ id: string; owners: string[] }>();
    assert.deepEqual(db.owners, ['public-user']);

    const inserted = await request(platform.server.publicPort, {
      method: 'POST',
      path: `/v1/databases/${db.id}/collections/items:insert`,
      host: 'docdb.localhost',
      headers: { ...owner, ...form },
      body: '{"sku":"a1","price":3}\n{"sku":"b2","price":5}',
    });
    assert.equal(inserted.status, 201, inserted.text);
    assert.equal(lines(inserted.text).length, 2);

    const databaseKey = await request(platform.server.publicPort, {
      method: 'POST',
      path: `/v1/databases/${db.id}:createApiKey`,
      host: 'api.localhost',
      headers: owner,
      body: '{"name":"app"}',
    });
    assert.equal(databaseKey.status, 201, databaseKey.text);
    const dbKey = databaseKey.json<{ key: string; secret: string }>();
    // A database key is not a platform key: the gateway passes it through and docdb checks it.
    const found = await request(platform.server.publicPort, {
      method: 'POST',
      path: `/v1/databases/${db.id}/collections/items:find`,
      host: 'api.localhost',
      headers: { 'api-key': dbKey.key, 'api-secret': dbKey.secret },
      body: '{"filter":{"price":{"$gt":4}},"limit":-1}',
    });
    assert.equal(found.status, 200, found.text);
    assert.match(String(found.headers['content-type']), /^application\/json/);
    assert.deepEqual(
      lines(found.text).map((document) => [document.sku, document.price]),
      [['b2', 5]],
    );
    const wrongSecret = await request(platform.server.publicPort, {
      method: 'POST',
      path: `/v1/databases/${db.id}/collections/items:find`,
      host: 'docdb.localhost',
      headers: { 'api-key': dbKey.key, 'api-secret': key },
      body: '{}',
    });
    assert.equal(wrongSecret.status, 401);
    const anonymous = await request(platform.server.publicPort, {
      method: 'POST',
      path: `/v1/databases/${db.id}/collections/items:find`,
      host: 'docdb.localhost',
      body: '{}',
    });
    assert.equal(anonymous.status, 401);
  });
});
