import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request } from '../helpers/http.ts';
import { usePlatform } from '../helpers/serve.ts';
import { createApiKey } from '../helpers/apikeys.ts';

const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'files-user' } }) };

describe('files through the gateway', () => {
  const platform = usePlatform();

  it('serves files.<domain> and /v1/buckets on api.<domain>, with an API key on the public port', async () => {
    const internal = platform.server.internalPort;
    const created = await request(internal, {
      method: 'POST',
      path: '/v1/buckets',
      host: 'api.localhost',
      headers: { ...identity, 'content-type': 'application/json' },
      body: '{"name":"gw"}',
    });
    assert.equal(created.status, 201, created.text);
    const bucket = created.json<{ id: string }>().id;
    const content = Buffer.from('through the gateway');
    const put = await request(internal, {
      method: 'PUT',
      path: `/v1/buckets/${bucket}/files/a/b.txt`,
      host: 'files.localhost',
      headers: { ...identity, 'content-type': 'text/plain' },
      body: content,
    });
    assert.equal(put.status, 201, put.text);
    const viaApi = await request(internal, {
      path: `/v1/buckets/${bucket}/files/a/b.txt`,
      host: 'api.localhost',
      headers: identity,
    });
    assert.equal(viaApi.status, 200);
    assert.equal(viaApi.text, content.toString());
    assert.equal(viaApi.headers.etag, `"${createHash('sha256').update(content).digest('hex')}"`);

    // A platform API key on the public port: the gateway authenticates and injects the identity.
    const { key: apiKey, secret } = await createApiKey(internal, identity, 'files');
    const auth = { 'api-key': apiKey, 'api-secret': secret };
    const pub = platform.server.publicPort;
    const listed = await request(pub, { path: '/v1/buckets', host: 'files.localhost', headers: auth });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      listed.json<{ id: string }[]>().map((b) => b.id),
      [bucket],
    );
    const upload = await request(pub, {
      method: 'PUT',
      path: `/v1/buckets/${bucket}/files/public.bin`,
      host: 'files.localhost',
      headers: auth,
      body: Buffer.from([1, 2, 3]),
    });
    assert.equal(upload.status, 201, upload.text);
    const range = await request(pub, {
      path: `/v1/buckets/${bucket}/files/public.bin`,
      host: 'files.localhost',
      headers: { ...auth, range: 'bytes=1-' },
    });
    assert.equal(range.status, 206);
    assert.equal(range.headers['content-range'], 'bytes 1-2/3');
    const anonymous = await request(pub, { path: '/v1/buckets', host: 'files.localhost' });
    assert.equal(anonymous.status, 401);
    // A forged identity header from a client is stripped by the gateway.
    const forged = await request(pub, { path: '/v1/buckets', host: 'files.localhost', headers: identity });
    assert.equal(forged.status, 401);
  });
});
