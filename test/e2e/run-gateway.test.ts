import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/http.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';
import { basicAuth, createApiKey } from '../helpers/apikeys.ts';

const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'user-pusher' } }) };
const digestOf = (data: string) => `sha256:${createHash('sha256').update(data).digest('hex')}`;

describe('run service through the gateway (registry on run., api. and the bare host)', () => {
  let database: TestDatabase;
  let server: ServedProcess;
  let basic: { authorization: string };

  before(async () => {
    database = await createTestDatabase();
    server = await serve([], {
      DATA_DIR: database.dataDir,
      DATABASE_URL: database.databaseUrl,
      RUN_MAX_BLOB_BYTES: '1MiB',
    });
    basic = basicAuth(await createApiKey(server.internalPort, identity, 'registry'));
  });

  after(async () => {
    await server.stop();
    await database.cleanup();
  });

  it('challenges without credentials and answers the version check with a platform key, on every registry host', async () => {
    for (const host of [
      `localhost:${server.publicPort}`,
      `127.0.0.1:${server.publicPort}`,
      'api.localhost',
      'run.localhost',
    ]) {
      const anonymous = await request(server.publicPort, { path: '/v2/', host });
      assert.equal(anonymous.status, 401, `${host}: ${anonymous.text}`);
      assert.equal(anonymous.headers['www-authenticate'], 'Basic realm="Stratus Registry"');
      assert.deepEqual(anonymous.json(), {
        errors: [{ code: 'UNAUTHORIZED', message: 'authentication required', detail: null }],
      });
      const authenticated = await request(server.publicPort, { path: '/v2/', host, headers: basic });
      assert.equal(authenticated.status, 200, `${host}: ${authenticated.text}`);
      assert.equal(authenticated.headers['docker-distribution-api-version'], 'registry/2.0');
      assert.deepEqual(authenticated.json(), {});
    }
    const wrongSecret = await request(server.publicPort, {
      path: '/v2/',
      host: `localhost:${server.publicPort}`,
      headers: { authorization: `Basic ${Buffer.from('nokey:nosecret').toString('base64')}` },
    });
    assert.equal(wrongSecret.status, 401);
  });

  it('pushes over the public port to localhost:<port> and the tag shows in the console on run.localhost', async () => {
    const host = `localhost:${server.publicPort}`;
    const name = 'gateway/app';
    const octet = { ...basic, 'content-type': 'application/octet-stream' };
    const config = '{}';
    const layer = 'layer through the gateway';
    const started = await request(server.publicPort, {
      method: 'POST',
      path: `/v2/${name}/blobs/uploads/`,
      host,
      headers: basic,
    });
    assert.equal(started.status, 202, started.text);
    const location = String(started.headers.location);
    const patched = await request(server.publicPort, {
      method: 'PATCH',
      path: location,
      host,
      headers: octet,
      body: layer,
    });
    assert.equal(patched.status, 202, patched.text);
    assert.equal(patched.headers.range, `0-${layer.length - 1}`);
    const finished = await request(server.publicPort, {
      method: 'PUT',
      path: `${location}?digest=${digestOf(layer)}`,
      host,
      headers: basic,
    });
    assert.equal(finished.status, 201, finished.text);
    const mono = await request(server.publicPort, {
      method: 'POST',
      path: `/v2/${name}/blobs/uploads/?digest=${digestOf(config)}`,
      host: 'api.localhost',
      headers: octet,
      body: config,
    });
    assert.equal(mono.status, 201, mono.text);
    const head = await request(server.publicPort, {
      method: 'HEAD',
      path: `/v2/${name}/blobs/${digestOf(layer)}`,
      host,
      headers: basic,
    });
    assert.equal(head.status, 200);
    assert.equal(head.headers['content-length'], String(layer.length));
    const manifest = JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
      config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: 2, digest: digestOf(config) },
      layers: [
        { mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: layer.length, digest: digestOf(layer) },
      ],
    });
    const put = await request(server.publicPort, {
      method: 'PUT',
      path: `/v2/${name}/manifests/latest`,
      host,
      headers: { ...basic, 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' },
      body: manifest,
    });
    assert.equal(put.status, 201, put.text);
    assert.equal(put.headers['docker-content-digest'], digestOf(manifest));

    const consoleData = await request(server.publicPort, {
      path: `/api/console?repository=${name}`,
      host: 'run.localhost',
      headers: basic,
    });
    assert.equal(consoleData.status, 200, consoleData.text);
    assert.deepEqual(consoleData.json<{ references: string[] }>().references, ['latest']);
    const started2 = await request(server.publicPort, {
      method: 'POST',
      path: '/api/console/start',
      host: 'run.localhost',
      headers: { ...basic, 'content-type': 'application/json' },
      body: JSON.stringify({ repository: name, reference: 'latest' }),
    });
    assert.equal(started2.status, 200, started2.text);
    assert.deepEqual(started2.json<{ desired: unknown }>().desired, {
      state: 'running',
      reference: 'latest',
      digest: digestOf(manifest),
    });
    const version = await request(server.publicPort, { path: '/version', host: 'run.localhost' });
    assert.equal(version.status, 200);
    assert.match(version.text, /^\d+\.\d+\.\d+/);
  });

  it('answers 413 SIZE_INVALID to a streamed body over RUN_MAX_BLOB_BYTES, and the connection serves the next request', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const send = (method: string, path: string, body?: (req: http.ClientRequest) => void) =>
      new Promise<{ status: number; text: string; socket: unknown }>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port: server.publicPort,
            method,
            path,
            agent,
            headers: { host: `localhost:${server.publicPort}`, ...basic, 'content-type': 'application/octet-stream' },
          },
          (res) => {
            let text = '';
            res.on('data', (chunk: Buffer) => (text += chunk.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, text, socket: req.socket }));
          },
        );
        req.on('error', reject);
        if (body) body(req);
        else req.end();
      });
    try {
      const big = Buffer.alloc(256 * 1024, 7);
      // Chunked transfer (no Content-Length): the limit is enforced while streaming, and the body
      // runs well past it (4 MiB), so the server stops reading halfway and must discard the rest.
      const refused = await send('POST', `/v2/gateway/big/blobs/uploads/?digest=${digestOf('x')}`, (req) => {
        for (let i = 0; i < 16; i++) req.write(big);
        req.end();
      });
      assert.equal(refused.status, 413, refused.text);
      assert.equal(JSON.parse(refused.text).errors[0].code, 'SIZE_INVALID');
      const next = await send('GET', '/v2/');
      assert.equal(next.status, 200);
      assert.equal(next.socket, refused.socket, 'the same keep-alive connection');
    } finally {
      agent.destroy();
    }
  });
});
