import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { IDENTITY_HEADER, PROJECT_HEADER } from '../../src/core/identity.ts';
import { TRIGGER_HEADER, type TaskTrigger } from '../../src/core/trigger.ts';
import { createServiceApp, type ServiceApp } from '../../src/core/app.ts';
import { PlatformServiceCalls, ServiceCallFailed } from '../../src/gateway/service-calls.ts';
import type { ServiceName } from '../../src/config.ts';

// A part of the platform calling a service as a given user (lambda bindings, issue 22): in process
// and on a remote upstream's internal port, with an identity the request cannot change.

describe('platform service calls', () => {
  let upstream: http.Server;
  let upstreamUrl: string;
  let app: ServiceApp;
  const seen: http.IncomingHttpHeaders[] = [];
  const closed: string[] = [];

  before(async () => {
    upstream = http.createServer((req, res) => {
      seen.push(req.headers);
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        if (req.url === '/big') return res.end(Buffer.alloc(5000));
        res.writeHead(201, { 'content-type': 'application/json', 'x-two': ['a', 'b'] });
        res.end(JSON.stringify({ url: req.url, method: req.method, body }));
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    app = await createServiceApp({
      name: 'config',
      domain: 'localhost',
      version: '1',
      logger: pino({ level: 'silent' }),
      openapiPath: null,
    });
    app.get('/forever', (request, reply) => {
      // Writes a line every 10 ms until the response closes (a follow-like stream).
      reply.raw.writeHead(200, { 'content-type': 'text/plain' });
      const timer = setInterval(() => reply.raw.write('line\n'), 10);
      reply.raw.on('close', () => {
        clearInterval(timer);
        closed.push('forever');
      });
    });
    app.all('/*', async (request) => ({
      url: request.url,
      host: request.headers.host,
      identity: request.headers[IDENTITY_HEADER],
      project: request.headers[PROJECT_HEADER] ?? null,
      trigger: request.headers[TRIGGER_HEADER] ?? null,
      cookie: request.headers.cookie ?? null,
      type: request.headers['content-type'] ?? null,
      body: request.body ?? null,
    }));
    await app.ready();
  });
  after(async () => {
    await app.close();
    upstream.closeAllConnections();
    await new Promise((resolve) => upstream.close(resolve));
  });

  const calls = () =>
    new PlatformServiceCalls({
      domain: 'localhost',
      apps: new Map<ServiceName, ServiceApp>([['config', app]]),
      upstreamUrls: { docdb: upstreamUrl },
    });
  const forged = {
    [IDENTITY_HEADER]: '{"user":{"id":"user-admin"}}',
    [PROJECT_HEADER]: 'project-other',
    [TRIGGER_HEADER]: '{"type":"cron","scheduled_at":"2026-01-01T00:00:00Z"}',
    cookie: 'stratus_session=stolen',
    authorization: 'Bearer x',
    host: 'evil.localhost',
  };

  it('calls a service in this process as the given user; forged identity headers are dropped', async () => {
    const answer = await calls().call('config', {
      method: 'POST',
      path: '/v1/config?x=1',
      headers: { ...forged, 'content-type': 'application/json' },
      body: '{"a":1}',
      identity: { user: { id: 'user-owner' } },
      project: 'project-mine',
    });
    assert.equal(answer.status, 200);
    assert.deepEqual(JSON.parse(answer.body.toString()), {
      url: '/v1/config?x=1',
      host: 'config.localhost',
      identity: '{"user":{"id":"user-owner"}}',
      project: 'project-mine',
      trigger: null,
      cookie: null,
      type: 'application/json',
      body: { a: 1 },
    });
  });

  it("sends the platform's own trigger of a run, never one the request headers carry", async () => {
    const trigger: TaskTrigger = { type: 'task', scheduler_id: 's1', task_id: 't1', attempt: 2, labels: ['a:b'] };
    const answer = await calls().call('config', {
      method: 'POST',
      path: '/x',
      headers: forged,
      identity: { user: { id: 'user-owner' } },
      trigger,
    });
    assert.deepEqual(JSON.parse(JSON.parse(answer.body.toString()).trigger as string), trigger);
  });

  it("calls a remote service on its upstream's internal port, with the same headers", async () => {
    const answer = await calls().call('docdb', {
      method: 'PUT',
      path: '/v1/databases',
      headers: forged,
      body: 'payload',
      identity: { user: { id: 'user-owner' } },
    });
    assert.equal(answer.status, 201);
    assert.deepEqual(JSON.parse(answer.body.toString()), { url: '/v1/databases', method: 'PUT', body: 'payload' });
    assert.deepEqual(
      answer.headers.filter(([name]) => name === 'x-two'),
      [
        ['x-two', 'a'],
        ['x-two', 'b'],
      ],
    );
    const headers = seen.at(-1)!;
    assert.equal(headers.host, 'docdb.localhost');
    assert.equal(headers[IDENTITY_HEADER], '{"user":{"id":"user-owner"}}');
    assert.equal(headers[PROJECT_HEADER], undefined);
    assert.equal(headers.cookie, undefined);
    assert.equal(headers.authorization, undefined);
  });

  it('keeps every call on its service: no `//host` or backslash path reaches another host', async () => {
    const identity = { user: { id: 'user-owner' } };
    const before = seen.length;
    for (const path of ['//127.0.0.1:1/x', '/\\127.0.0.1:1/x', '/a\\b', '/x\n']) {
      for (const service of ['config', 'docdb'] as const)
        await assert.rejects(calls().call(service, { method: 'GET', path, identity }), /must start with a single/);
    }
    assert.equal(seen.length, before);
  });

  it('closes an in-process answer when the signal aborts, and counts its bytes as they come', async () => {
    const identity = { user: { id: 'user-owner' } };
    const aborter = new AbortController();
    const pending = calls().call('config', { method: 'GET', path: '/forever', identity, signal: aborter.signal });
    setTimeout(() => aborter.abort(), 50);
    await assert.rejects(pending, /cut short/);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(closed, ['forever'], 'the service saw its response close');
    let counted = 0;
    await assert.rejects(
      calls().call('config', {
        method: 'GET',
        path: '/forever',
        identity,
        onBytes: (bytes) => {
          counted += bytes;
          if (counted > 20) throw new Error('over the budget');
        },
      }),
      /over the budget/,
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(closed, ['forever', 'forever']);
  });

  it('fails clearly for a service running nowhere, a relative path and an answer over the cap', async () => {
    const identity = { user: { id: 'user-owner' } };
    await assert.rejects(
      calls().call('kv', { method: 'GET', path: '/', identity }),
      (error: unknown) => error instanceof ServiceCallFailed && /not running anywhere known/.test(error.message),
    );
    await assert.rejects(calls().call('config', { method: 'GET', path: 'relative', identity }), /must start with/);
    await assert.rejects(
      calls().call('docdb', { method: 'GET', path: '/big', identity, maxBodyBytes: 1000 }),
      /answer is over 1000 bytes/,
    );
  });
});
