import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import type { ServiceName } from '../../src/config.ts';
import { createServiceApp, type ServiceApp } from '../../src/core/app.ts';
import { buildGatewayApp } from '../../src/gateway/app.ts';
import { createGatewayHandler, listen, type Listener } from '../../src/gateway/server.ts';
import { createPolicy } from '../../src/gateway/policy.ts';
import { createUpstreamProxy, type UpstreamProxy } from '../../src/gateway/proxy.ts';
import { GatewayStats } from '../../src/gateway/stats.ts';
import { openSqlite } from '../../src/store/db.ts';
import { openNdjson } from '../../src/core/stream.ts';
import { request } from '../helpers/http.ts';

/** A service that answers with the headers it received, both parsed and raw. */
async function echoApp(): Promise<ServiceApp> {
  const app = await createServiceApp({ name: 'echo', version: '0.0.0', logger: pino({ level: 'silent' }) });
  app.all('/*', async (request) => ({
    headers: request.headers,
    rawHeaders: request.raw.rawHeaders,
    url: request.url,
    method: request.method,
  }));
  app.get('/stream', async (_request, reply) => {
    reply.hijack();
    const writer = openNdjson(reply.raw);
    for (let i = 0; i < 3; i++) await writer.write({ i });
    writer.end();
  });
  await app.ready();
  return app;
}

describe('gateway dispatch over real sockets', () => {
  let publicPort: Listener;
  let internalPort: Listener;
  /** The internal port of another instance that runs docdb (an echo app), the front's remote upstream. */
  let remotePort: Listener;
  let remoteProxy: UpstreamProxy;
  const apps: ServiceApp[] = [];

  before(async () => {
    const logger = pino({ level: 'silent' });
    const echo = await echoApp();
    const services = new Map<ServiceName, ServiceApp>([
      ['config', echo],
      ['lambda', echo],
    ]);
    const stats = new GatewayStats();
    const gateway = await buildGatewayApp({
      version: '9.9.9',
      logger,
      domain: 'localhost',
      connection: openSqlite(':memory:'),
      stats,
      services,
      upstreamUrls: {},
    });
    await gateway.ready();
    apps.push(echo, gateway);
    const projects = {
      bySlug: async (slug: string) => (slug === 'my-project' ? { id: 'project-1', slug } : null),
      originListed: async () => false,
    };
    const remoteServices = new Map<ServiceName, ServiceApp>([['docdb', echo]]);
    const common = {
      domain: 'localhost',
      gateway,
      projects,
      policy: createPolicy([]),
      authenticator: null,
      stats,
      logger,
    };
    remotePort = await listen(
      createGatewayHandler({ ...common, services: remoteServices, upstreams: new Map() }, true),
      0,
      '127.0.0.1',
    );
    remoteProxy = createUpstreamProxy(`http://127.0.0.1:${remotePort.port}`);
    const options = { ...common, services, upstreams: new Map([['docdb' as ServiceName, remoteProxy]]) };
    publicPort = await listen(createGatewayHandler(options, false), 0, '127.0.0.1');
    internalPort = await listen(createGatewayHandler(options, true), 0, '127.0.0.1');
  });

  after(async () => {
    await publicPort.close();
    await internalPort.close();
    await remoteProxy.close();
    await remotePort.close();
    await Promise.all(apps.map((a) => a.close()));
  });

  const forged = {
    'X-Gateway-Authentication': '{"user":{"id":"admin"}}',
    'x-project-id': 'project-forged',
    'X-Stratus-Trigger': '{"type":"cron","scheduled_at":"2026-01-01T00:00:00Z"}',
    'X-Other': 'kept',
  };

  it('removes forged identity headers from headers and rawHeaders on the public port', async () => {
    const res = await request(publicPort.port, { path: '/v0/configs', host: 'config.localhost', headers: forged });
    assert.equal(res.status, 200);
    const body = res.json<{ headers: Record<string, string>; rawHeaders: string[] }>();
    assert.equal(body.headers['x-gateway-authentication'], undefined);
    assert.equal(body.headers['x-project-id'], undefined);
    assert.equal(body.headers['x-stratus-trigger'], undefined, 'only the platform starts a cron or task run');
    assert.equal(body.headers['x-other'], 'kept');
    const rawNames = body.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    assert.ok(!rawNames.includes('x-gateway-authentication'));
    assert.ok(!rawNames.includes('x-project-id'));
    assert.ok(!rawNames.includes('x-stratus-trigger'));
    assert.ok(rawNames.includes('x-other'));
  });

  it('passes identity headers through on the internal port', async () => {
    const res = await request(internalPort.port, { path: '/v1/config', host: 'api.localhost', headers: forged });
    const body = res.json<{ headers: Record<string, string>; rawHeaders: string[] }>();
    assert.equal(body.headers['x-gateway-authentication'], '{"user":{"id":"admin"}}');
    assert.equal(body.headers['x-project-id'], 'project-forged');
  });

  it('sets X-Project-Id on a project host, replacing a forged one even on the internal port', async () => {
    for (const port of [publicPort.port, internalPort.port]) {
      const res = await request(port, { path: '/page', host: 'my-project.localhost', headers: forged });
      assert.equal(res.status, 200);
      const body = res.json<{ headers: Record<string, string>; rawHeaders: string[] }>();
      assert.equal(body.headers['x-project-id'], 'project-1');
      assert.deepEqual(body.rawHeaders.filter((h) => h.toLowerCase() === 'x-project-id').length, 1);
      assert.ok(!body.rawHeaders.includes('project-forged'));
    }
  });

  it('answers 404 no_route for unknown hosts and unknown project slugs', async () => {
    for (const host of ['example.com', 'nobody.localhost', 'a.b.localhost']) {
      const res = await request(publicPort.port, { path: '/', host });
      assert.equal(res.status, 404, host);
      const body = res.json<{ error: { status: number; code: string } }>();
      assert.deepEqual([body.error.status, body.error.code], [404, 'no_route']);
    }
  });

  it('answers 503 service_unavailable for a known service that is not running here', async () => {
    const res = await request(publicPort.port, { path: '/schedulers', host: 'api.localhost' });
    assert.equal(res.status, 503);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.equal(res.json<{ error: { code: string } }>().error.code, 'service_unavailable');
  });

  it('answers 404 not_found on api.<domain> for a path no prefix claims', async () => {
    const res = await request(publicPort.port, { path: '/nothing-here', host: 'api.localhost' });
    assert.equal(res.status, 404);
    assert.equal(res.json<{ error: { code: string } }>().error.code, 'not_found');
  });

  it('serves the gateway version as plain text on gateway.<domain> and api.<domain>', async () => {
    for (const host of ['gateway.localhost', 'api.localhost', 'localhost']) {
      const res = await request(publicPort.port, { path: '/version', host });
      assert.equal(res.status, 200);
      assert.match(String(res.headers['content-type']), /^text\/plain/);
      assert.equal(res.text, '9.9.9');
    }
  });

  it('forwards method, path, query and body unchanged', async () => {
    const res = await request(publicPort.port, {
      method: 'PATCH',
      path: '/v0/configs/x?a=1&b=two',
      host: 'config.localhost',
      headers: { 'content-type': 'application/json' },
      body: '{"k":1}',
    });
    const body = res.json<{ url: string; method: string }>();
    assert.equal(body.method, 'PATCH');
    assert.equal(body.url, '/v0/configs/x?a=1&b=two');
  });

  it('streams NDJSON through in-process dispatch', async () => {
    const res = await request(publicPort.port, { path: '/stream', host: 'config.localhost' });
    assert.match(String(res.headers['content-type']), /application\/x-ndjson/);
    const lines = res.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(lines, [{ i: 0 }, { i: 1 }, { i: 2 }]);
  });

  describe('one base URL: /services/<name>/… on the front door', () => {
    type Echoed = { url: string; headers: Record<string, string> };

    it('strips the prefix, keeps the query and tells the service the prefix', async () => {
      for (const host of ['localhost:8080', 'api.localhost', '127.0.0.1']) {
        const res = await request(publicPort.port, {
          method: 'PATCH',
          path: '/services/config/v0/configs/x?a=1&b=two',
          host,
          headers: { 'content-type': 'application/json' },
          body: '{"k":1}',
        });
        assert.equal(res.status, 200, host);
        const body = res.json<Echoed>();
        assert.equal(body.url, '/v0/configs/x?a=1&b=two');
        assert.equal(body.headers['x-forwarded-prefix'], '/services/config');
      }
      const root = await request(publicPort.port, { path: '/services/config/?x=1', host: 'localhost' });
      assert.equal(root.json<Echoed>().url, '/?x=1');
      const posted = await request(publicPort.port, { method: 'POST', path: '/services/config', host: 'localhost' });
      assert.equal(posted.json<Echoed>().url, '/');
    });

    it('sends a GET of the bare /services/<name> to /services/<name>/, as for a folder', async () => {
      const res = await request(publicPort.port, { path: '/services/console?x=1', host: 'localhost' });
      assert.equal(res.status, 308);
      assert.equal(res.headers.location, '/services/console/?x=1');
    });

    it('serves the gateway under /services/gateway', async () => {
      const res = await request(publicPort.port, { path: '/services/gateway/version', host: 'localhost' });
      assert.equal(res.status, 200);
      assert.equal(res.text, '9.9.9');
    });

    it('answers 404 for names that are no service, and leaves service hosts their own paths', async () => {
      for (const path of ['/services/nope/x', '/services/api/version', '/services/']) {
        const res = await request(publicPort.port, { path, host: 'localhost' });
        assert.equal(res.status, 404, path);
        assert.equal(res.json<{ error: { code: string } }>().error.code, 'not_found');
      }
      const own = await request(publicPort.port, { path: '/services/config/x', host: 'config.localhost' });
      assert.equal(own.json<Echoed>().url, '/services/config/x');
      assert.equal(own.json<Echoed>().headers['x-forwarded-prefix'], undefined);
    });

    it('drops a client-sent X-Forwarded-Prefix on the public port', async () => {
      const res = await request(publicPort.port, {
        path: '/v0/configs/x',
        host: 'config.localhost',
        headers: { 'X-Forwarded-Prefix': '/evil' },
      });
      assert.equal(res.json<Echoed>().headers['x-forwarded-prefix'], undefined);
    });

    it('answers 503 for a service running nowhere known', async () => {
      const res = await request(publicPort.port, { path: '/services/files/v1/buckets', host: 'localhost' });
      assert.equal(res.status, 503);
      assert.equal(res.json<{ error: { code: string } }>().error.code, 'service_unavailable');
    });

    it('reaches a service on a remote upstream, whose internal port strips the prefix itself', async () => {
      const res = await request(publicPort.port, { path: '/services/docdb/v1/databases?x=1', host: 'localhost' });
      assert.equal(res.status, 200);
      const body = res.json<Echoed>();
      assert.equal(body.url, '/v1/databases?x=1');
      assert.equal(body.headers['x-forwarded-prefix'], '/services/docdb');
      // Without the prefix the front door's table sends `/v1/…` to docdb too, through the same upstream.
      const plain = await request(publicPort.port, { path: '/v1/databases', host: 'localhost' });
      assert.equal(plain.json<Echoed>().url, '/v1/databases');
    });
  });
});
