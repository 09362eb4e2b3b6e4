import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import pino from 'pino';
import { loadSettings, SettingsError, type ServiceName } from '../../src/config.ts';
import { createServiceApp, type ServiceApp } from '../../src/core/app.ts';
import { buildGatewayApp } from '../../src/gateway/app.ts';
import { TrustedProxies } from '../../src/gateway/client-address.ts';
import { createPolicy } from '../../src/gateway/policy.ts';
import { createGatewayHandler, listen, type Listener } from '../../src/gateway/server.ts';
import { GatewayStats } from '../../src/gateway/stats.ts';
import { openSqlite } from '../../src/store/db.ts';
import { request } from '../helpers/http.ts';

/** A request as the gateway sees it: the connection's address and the headers it carried. */
function req(socketAddress: string, headers: Record<string, string> = {}): IncomingMessage {
  return { socket: { remoteAddress: socketAddress }, headers } as unknown as IncomingMessage;
}

describe('trusted proxies: who the client is', () => {
  const proxies = new TrustedProxies(['10.0.0.0/8', '192.0.2.1', 'fd00::/8']);

  it('takes the last untrusted X-Forwarded-For hop behind a trusted proxy', () => {
    assert.equal(proxies.clientAddress(req('10.1.2.3', { 'x-forwarded-for': '203.0.113.7' })), '203.0.113.7');
    // A client-written hop before the real client is not believed: the rightmost untrusted wins.
    assert.equal(
      proxies.clientAddress(req('10.1.2.3', { 'x-forwarded-for': '1.1.1.1, 203.0.113.7, 10.9.9.9' })),
      '203.0.113.7',
    );
    assert.equal(proxies.clientAddress(req('::ffff:192.0.2.1', { 'x-forwarded-for': '2001:db8::5' })), '2001:db8::5');
    assert.equal(proxies.clientAddress(req('fd12::1', { 'x-forwarded-for': '198.51.100.2' })), '198.51.100.2');
  });

  it('ignores X-Forwarded-For from anyone else, and stops at a malformed hop', () => {
    assert.equal(proxies.clientAddress(req('203.0.113.50', { 'x-forwarded-for': '10.0.0.1' })), '203.0.113.50');
    assert.equal(proxies.clientAddress(req('10.1.2.3')), '10.1.2.3', 'a proxy without the header is the client');
    assert.equal(proxies.clientAddress(req('10.1.2.3', { 'x-forwarded-for': 'not-an-ip' })), '10.1.2.3');
    assert.equal(proxies.clientAddress(req('10.1.2.3', { 'x-forwarded-for': 'junk, 203.0.113.7' })), '203.0.113.7');
    assert.equal(new TrustedProxies().clientAddress(req('10.1.2.3', { 'x-forwarded-for': '203.0.113.7' })), '10.1.2.3');
  });

  it('forwards the chain and the scheme only from a trusted proxy', () => {
    const behind = req('10.1.2.3', { 'x-forwarded-for': '203.0.113.7', 'x-forwarded-proto': 'https' });
    assert.equal(proxies.forwardedFor(behind), '203.0.113.7, 10.1.2.3');
    assert.equal(proxies.forwardedProto(behind), 'https');
    const direct = req('203.0.113.50', { 'x-forwarded-for': '10.0.0.1', 'x-forwarded-proto': 'https' });
    assert.equal(proxies.forwardedFor(direct), '203.0.113.50');
    assert.equal(proxies.forwardedProto(direct), 'http');
  });

  it('refuses a TRUSTED_PROXIES entry that is neither an address nor a CIDR block', () => {
    assert.deepEqual(
      loadSettings({}, { TRUSTED_PROXIES: '127.0.0.1, 10.0.0.0/8,::1' }, '/nonexistent').trustedProxies,
      ['127.0.0.1', '10.0.0.0/8', '::1'],
    );
    for (const bad of ['haproxy', '10.0.0.0/33', '10.0.0.1/8/1', '::1/129'])
      assert.throws(
        () => loadSettings({}, { TRUSTED_PROXIES: bad }, '/nonexistent'),
        (error: unknown) => error instanceof SettingsError && error.message.includes('TRUSTED_PROXIES'),
      );
  });
});

describe('trusted proxies on the public port', () => {
  let port: Listener;
  const apps: ServiceApp[] = [];

  before(async () => {
    const logger = pino({ level: 'silent' });
    const echo = await createServiceApp({ name: 'echo', version: '0.0.0', logger });
    echo.all('/*', async (request) => ({ headers: request.headers }));
    await echo.ready();
    const services = new Map<ServiceName, ServiceApp>([['config', echo]]);
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
    // The test client connects from 127.0.0.1, which plays the load balancer.
    const proxies = new TrustedProxies(['127.0.0.1']);
    const options = {
      domain: 'localhost',
      services,
      upstreams: new Map(),
      gateway,
      projects: { bySlug: async () => null, originListed: async () => false },
      policy: createPolicy([]),
      authenticator: null,
      stats,
      logger,
      proxies,
    };
    port = await listen(createGatewayHandler(options, false), 0, '127.0.0.1', {
      maxConnectionsPerAddress: 2,
      trustedProxies: proxies,
    });
  });

  after(async () => {
    await port.close();
    await Promise.all(apps.map((app) => app.close()));
  });

  it("passes the balancer's client chain and scheme on to the service", async () => {
    const res = await request(port.port, {
      path: '/v0/configs',
      host: 'config.localhost',
      headers: { 'x-forwarded-for': '203.0.113.7', 'x-forwarded-proto': 'https' },
    });
    assert.equal(res.status, 200);
    const { headers } = res.json<{ headers: Record<string, string> }>();
    assert.equal(headers['x-forwarded-for'], '203.0.113.7, 127.0.0.1');
    assert.equal(headers['x-forwarded-proto'], 'https');
  });

  it('does not hold a trusted proxy to the per-address connection cap', async () => {
    const sockets = await Promise.all(
      Array.from(
        { length: 5 },
        () =>
          new Promise<net.Socket>((resolve, reject) => {
            const socket = net.connect(port.port, '127.0.0.1', () => resolve(socket));
            socket.once('error', reject);
          }),
      ),
    );
    try {
      // Were the cap applied, connections beyond the second would be closed at once.
      const answers = await Promise.all(
        sockets.map(
          (socket) =>
            new Promise<string>((resolve) => {
              let text = '';
              socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
              socket.on('close', () => resolve(text));
              socket.write('GET /version HTTP/1.1\r\nHost: gateway.localhost\r\nConnection: close\r\n\r\n');
            }),
        ),
      );
      for (const answer of answers) assert.match(answer, /^HTTP\/1\.1 200/);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  });
});
