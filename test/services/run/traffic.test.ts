// Traffic to a running repository's container (service README: Traffic), with a loopback HTTP
// server standing in for the container and a driver that records its port as the podman one does.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRunService, DriverRecords } from '../../../src/services/run/index.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';
import { pushImage } from './helpers.ts';

const alice = asUser('user-alice');
const json = { 'content-type': 'application/json' };
const HOST = 'shop-web.run.localhost';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

describe('run traffic: <slug>.run.<domain> to the container', () => {
  let service: TestService;
  let container: http.Server;
  let port = 0;
  const seen: Seen[] = [];

  before(async () => {
    container = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        res.setHeader('set-cookie', ['stratus_session=stolen; Path=/', 'theme=dark; Path=/']);
        res.setHeader('clear-site-data', '"cookies"');
        res.setHeader('x-app', 'yes');
        res.writeHead(201, { 'content-type': 'text/plain' });
        res.end(`echo ${req.method} ${req.url} ${body}`);
      });
    });
    await new Promise<void>((resolve) => container.listen(0, '127.0.0.1', resolve));
    port = (container.address() as AddressInfo).port;
    service = await startTestService(
      createRunService({
        driver: (connection) => {
          const records = new DriverRecords(connection);
          return {
            name: 'loopback',
            async apply(repository, desired) {
              await records.save(repository, desired, null);
              await records.setPort(repository, desired.state === 'running' ? port : null);
            },
          };
        },
      }),
    );
    await pushImage(service.app, 'user-alice', 'shop/web', 'v1', 'web layer');
    const started = await service.app.inject({
      method: 'POST',
      url: '/api/console/start',
      headers: { ...alice, ...json },
      payload: JSON.stringify({ repository: 'shop/web', reference: 'v1' }),
    });
    assert.equal(started.statusCode, 200, started.body);
    assert.equal(started.json<{ host: string }>().host, HOST);
  });
  after(async () => {
    await service.close();
    container.close();
  });

  it('streams the request to the container and its answer back, path, query, method and body as sent', async () => {
    const answer = await service.app.inject({
      method: 'POST',
      url: '/orders?id=7',
      headers: { host: HOST, 'content-type': 'text/plain' },
      payload: 'one order',
    });
    assert.equal(answer.statusCode, 201);
    assert.equal(answer.body, 'echo POST /orders?id=7 one order');
    assert.equal(answer.headers['x-app'], 'yes');
    const last = seen.at(-1)!;
    assert.equal(last.headers.host, HOST, 'the container sees the host the visitor asked for');
  });

  it('shows the container only what user code may see of the visitor, and drops platform cookies it sets', async () => {
    const answer = await service.app.inject({
      method: 'GET',
      url: '/me',
      headers: {
        host: HOST,
        'x-gateway-authentication': JSON.stringify({
          user: { id: 'user-visitor', email: 'v@example.com' },
          auth: { method: 'session' },
          session: { id: 'session-secret-id' },
        }),
        cookie: 'stratus_sso_state=abc; cart=3',
      },
    });
    assert.equal(answer.statusCode, 201);
    const last = seen.at(-1)!;
    assert.deepEqual(JSON.parse(String(last.headers['x-gateway-authentication'])), {
      user: { id: 'user-visitor', email: 'v@example.com' },
    });
    assert.equal(last.headers.cookie, 'cart=3');
    const cookies = answer.headers['set-cookie'];
    assert.deepEqual(Array.isArray(cookies) ? cookies : [cookies], ['theme=dark; Path=/']);
    assert.equal(answer.headers['clear-site-data'], undefined);
  });

  it('answers 502 when the container does not answer, and 503 once the repository is stopped', async () => {
    container.close();
    container.closeAllConnections();
    const down = await service.app.inject({ method: 'GET', url: '/', headers: { host: HOST } });
    assert.equal(down.statusCode, 502, down.body);
    assert.equal(down.json<{ error: { code: string } }>().error.code, 'bad_gateway');
    const stopped = await service.app.inject({
      method: 'POST',
      url: '/api/console/stop',
      headers: { ...alice, ...json },
      payload: JSON.stringify({ repository: 'shop/web' }),
    });
    assert.equal(stopped.statusCode, 200);
    // Routes are reused for up to a second.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const after = await service.app.inject({ method: 'GET', url: '/', headers: { host: HOST } });
    assert.equal(after.statusCode, 503, after.body);
    assert.equal(after.json<{ error: { code: string } }>().error.code, 'not_running');
  });
});
