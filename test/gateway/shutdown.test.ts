import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import pino from 'pino';
import { onDrain } from '../../src/core/drain.ts';
import { buildGatewayApp } from '../../src/gateway/app.ts';
import { Readiness } from '../../src/gateway/readiness.ts';
import { listen } from '../../src/gateway/server.ts';
import { GatewayStats } from '../../src/gateway/stats.ts';
import { openSqlite } from '../../src/store/db.ts';
import type { SqlDatabase } from '../../src/store/sql/types.ts';
import { request } from '../helpers/http.ts';

const sqlite = () => openSqlite(':memory:');

/** A GET on a kept-alive agent with one socket, so a second request reuses the first connection. */
function keptAlive(port: number, agent: http.Agent, path: string) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, agent }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      })
      .on('error', reject);
  });
}

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(false)));
    socket.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED'));
  });
}

describe('readiness', () => {
  it('answers /readyz on gateway, api, bare and foreign hosts before the handler: 200, HEAD without a body, other methods pass', async () => {
    const connection = sqlite();
    const readiness = new Readiness(connection.database, 'localhost');
    const listener = await listen((_req, res) => res.end('handler'), 0, '127.0.0.1', { readiness });
    try {
      for (const host of ['10.1.2.3:8080', 'lb.example.com', 'gateway.localhost', 'api.localhost', 'localhost']) {
        const ok = await request(listener.port, { path: '/readyz', host });
        assert.equal(ok.status, 200);
        assert.deepEqual(ok.json(), { status: 'ready' });
        assert.equal(ok.headers['cache-control'], 'no-store');
      }
      const head = await request(listener.port, { method: 'HEAD', path: '/readyz?probe=1' });
      assert.equal(head.status, 200);
      assert.equal(head.text, '');
      assert.equal((await request(listener.port, { method: 'POST', path: '/readyz', body: '' })).text, 'handler');
      assert.equal((await request(listener.port, { path: '/readyz/x' })).text, 'handler');
      // Service and project hosts keep their own paths (the key-value node has a /readyz).
      assert.equal((await request(listener.port, { path: '/readyz', host: 'kv.localhost' })).text, 'handler');
      assert.equal((await request(listener.port, { path: '/readyz', host: 'myproject.localhost' })).text, 'handler');
    } finally {
      await listener.close(0);
      await connection.close();
    }
  });

  it('503 store_unreachable when the store fails or does not answer, 503 draining once drained', async () => {
    const failing = { read: () => Promise.reject(new Error('down')) } as unknown as SqlDatabase;
    const down = await new Readiness(failing, 'localhost').answer();
    assert.equal(down.status, 503);
    assert.deepEqual(Object.keys(down.body), ['error']);
    assert.equal((down.body as { error: { code: string } }).error.code, 'store_unreachable');
    const hanging = { read: () => new Promise(() => {}) } as unknown as SqlDatabase;
    const started = Date.now();
    const slow = await new Readiness(hanging, 'localhost').answer();
    assert.equal(slow.status, 503);
    assert.ok(Date.now() - started >= 1_900, 'waited for the store up to 2 s');
    const connection = sqlite();
    const readiness = new Readiness(connection.database, 'localhost');
    assert.equal((await readiness.answer()).status, 200);
    readiness.drain();
    assert.deepEqual(await readiness.answer(), {
      status: 503,
      body: { error: { status: 503, code: 'draining', message: 'this instance is shutting down' } },
    });
    await connection.close();
  });

  it('the gateway app serves GET /readyz and lists it in its OpenAPI document', async () => {
    const connection = sqlite();
    const readiness = new Readiness(connection.database, 'localhost');
    const app = await buildGatewayApp({
      version: 't',
      logger: pino({ level: 'silent' }),
      domain: 'localhost',
      connection,
      stats: new GatewayStats(),
      services: new Map(),
      upstreamUrls: {},
      readiness,
    });
    try {
      const ok = await app.inject({ method: 'GET', url: '/readyz', headers: { host: 'gateway.localhost' } });
      assert.equal(ok.statusCode, 200);
      readiness.drain();
      const draining = await app.inject({ method: 'GET', url: '/readyz', headers: { host: 'gateway.localhost' } });
      assert.equal(draining.statusCode, 503);
      assert.equal(draining.json<{ error: { code: string } }>().error.code, 'draining');
      const doc = (
        await app.inject({ method: 'GET', url: '/openapi.json', headers: { host: 'gateway.localhost' } })
      ).json<{
        paths: Record<string, { get?: { responses: Record<string, unknown> } }>;
      }>();
      assert.ok(doc.paths['/readyz']?.get, 'in the OpenAPI document');
      assert.deepEqual(Object.keys(doc.paths['/readyz']!.get!.responses).sort(), ['200', '503']);
    } finally {
      await app.close();
      await connection.close();
    }
  });
});

describe('listener drain', () => {
  it('refuses new connections, closes idle ones, finishes in-flight requests with Connection: close', async () => {
    let finishSlow: () => void = () => {};
    const drained: string[] = [];
    const listener = await listen(
      (req, res) => {
        if (req.url === '/slow') {
          finishSlow = () => res.end('slow done');
          return;
        }
        if (req.url === '/stream') {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('open\n');
          onDrain(req, () => {
            drained.push('stream');
            res.end('bye\n');
          });
          return;
        }
        res.end('fast');
      },
      0,
      '127.0.0.1',
    );
    const idleAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    assert.equal((await keptAlive(listener.port, idleAgent, '/')).text, 'fast');
    let idleClosed = false;
    // The agent's idle socket is the kept-alive connection.
    const idleSocket = Object.values(idleAgent.freeSockets)[0]![0]!;
    idleSocket.once('close', () => (idleClosed = true));
    const slow = keptAlive(listener.port, new http.Agent({ keepAlive: true }), '/slow');
    const streamed = keptAlive(listener.port, new http.Agent({ keepAlive: true }), '/stream');
    await new Promise((r) => setTimeout(r, 100));

    const closing = listener.close(5_000);
    assert.deepEqual(await streamed.then((r) => [r.status, r.text, drained]), [200, 'open\nbye\n', ['stream']]);
    assert.equal(await refused(listener.port), true);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(idleClosed, true, 'idle keep-alive connection closed');
    finishSlow();
    const answered = await slow;
    assert.equal(answered.text, 'slow done');
    assert.equal(answered.headers.connection, 'close');
    assert.equal(await closing, 0, 'nothing cut');
    idleAgent.destroy();
  });

  it('cuts what is still in flight after the grace and counts it', async () => {
    const listener = await listen(() => {}, 0, '127.0.0.1');
    const stuck = request(listener.port, { path: '/never' }).then(
      () => 'answered',
      () => 'cut',
    );
    await new Promise((r) => setTimeout(r, 100));
    const started = Date.now();
    assert.equal(await listener.close(300), 1);
    assert.ok(Date.now() - started >= 280);
    assert.equal(await stuck, 'cut');
  });
});
