import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient, StratusError, Transport } from '../../packages/client/src/index.ts';

type Handler = (request: IncomingMessage, response: ServerResponse, body: string) => void;

/** A tiny local server whose answers each test scripts, recording what it was sent. */
describe('client transport', () => {
  let server: Server;
  let url: string;
  let handler: Handler;
  let seen: { method: string; url: string; headers: IncomingMessage['headers']; body: string }[];

  before(async () => {
    server = createServer((request, response) => {
      let body = '';
      request.setEncoding('utf8');
      request.on('data', (chunk: string) => (body += chunk));
      request.on('end', () => {
        seen.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body });
        handler(request, response, body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  beforeEach(() => {
    seen = [];
  });

  const fast = { baseDelayMs: 5, maxDelayMs: 50 };
  const json = (response: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}) => {
    response.writeHead(status, { 'content-type': 'application/json', 'x-request-id': 'req-1', ...headers });
    response.end(JSON.stringify(value));
  };
  const envelope = (status: number, code: string) => ({ error: { status, code, message: `${code}!` } });

  it('builds <url>/services/<service><path> and sends the bearer token, else the API key pair', async () => {
    handler = (_request, response) => json(response, 200, { ok: true });
    await createClient({ url: `${url}/`, token: 'tok' })
      .kv.collection('a b')
      .get('x/y z');
    await createClient({ url, apiKey: 'k', secret: 's' })
      .kv.listCollections()
      .catch(() => undefined);
    assert.equal(seen[0]!.url, '/services/kv/v1/collections/a%20b/keys/x/y%20z');
    assert.equal(seen[0]!.headers.authorization, 'Bearer tok');
    assert.equal(seen[1]!.headers['api-key'], 'k');
    assert.equal(seen[1]!.headers['api-secret'], 's');
    assert.equal(seen[1]!.headers.authorization, undefined);
  });

  it('retries a GET after 503 and answers the success', async () => {
    let calls = 0;
    handler = (_request, response) =>
      ++calls === 1
        ? json(response, 503, envelope(503, 'service_unavailable'))
        : json(response, 200, { collections: ['x'] });
    const client = createClient({ url, token: 't', retry: fast });
    assert.deepEqual(await client.kv.listCollections(), ['x']);
    assert.equal(seen.length, 2);
  });

  it('honours Retry-After on 429', async () => {
    let calls = 0;
    handler = (_request, response) =>
      ++calls === 1
        ? json(response, 429, envelope(429, 'too_many_requests'), { 'retry-after': '1' })
        : json(response, 200, { collections: [] });
    const started = Date.now();
    await createClient({ url, token: 't', retry: { baseDelayMs: 1, maxDelayMs: 5_000 } }).kv.listCollections();
    assert.equal(seen.length, 2);
    assert.ok(Date.now() - started >= 950, `waited ${Date.now() - started} ms`);
  });

  it('stops after three attempts and reports the last error', async () => {
    handler = (_request, response) => json(response, 502, envelope(502, 'bad_gateway'));
    await assert.rejects(createClient({ url, token: 't', retry: fast }).kv.listCollections(), {
      name: 'StratusError',
      status: 502,
      code: 'bad_gateway',
    });
    assert.equal(seen.length, 3);
  });

  it("does not send a PUT again after a run driver's 502 driver_error (it would fail the same way)", async () => {
    handler = (_request, response) => json(response, 502, envelope(502, 'driver_error'));
    const client = createClient({ url, token: 't', retry: fast });
    await assert.rejects(client.run.repository('team/app').setEnv([]), { status: 502, code: 'driver_error' });
    assert.deepEqual(
      seen.map((s) => s.method),
      ['PUT'],
    );
  });

  it('never retries a POST or a PATCH', async () => {
    handler = (_request, response) => json(response, 503, envelope(503, 'service_unavailable'));
    const client = createClient({ url, token: 't', retry: fast });
    await assert.rejects(client.kv.createCollection('x'), { status: 503 });
    await assert.rejects(client.config.patch({ a: 1 }), { status: 503 });
    assert.deepEqual(
      seen.map((s) => s.method),
      ['POST', 'PATCH'],
    );
  });

  it('does not retry a 500 or a 4xx, and keeps the error envelope and request id', async () => {
    handler = (_request, response) => json(response, 404, envelope(404, 'not_found'));
    const error = await createClient({ url, token: 't', retry: fast })
      .kv.collection('c')
      .get('k')
      .catch((e: unknown) => e);
    assert.ok(error instanceof StratusError);
    assert.equal(error.status, 404);
    assert.equal(error.code, 'not_found');
    assert.equal(error.message, 'not_found!');
    assert.equal(error.requestId, 'req-1');
    assert.equal(seen.length, 1);

    handler = (_request, response) => json(response, 500, envelope(500, 'internal_error'));
    await assert.rejects(createClient({ url, token: 't', retry: fast }).kv.listCollections(), { status: 500 });
    assert.equal(seen.length, 2);
  });

  it('reports a refused connection as status 0 network_error after retrying', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    await assert.rejects(
      createClient({ url: `http://127.0.0.1:${port}`, retry: fast }).kv.listCollections(),
      (error: unknown) => error instanceof StratusError && error.status === 0 && error.code === 'network_error',
    );
  });

  it('parses NDJSON and throws an error line as a StratusError', async () => {
    handler = (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/x-ndjson' });
      response.write('{"id":"1"}\n{"id"');
      setTimeout(() => response.end(':"2"}\n{"error":{"status":409,"code":"conflict","message":"index"}}\n'), 20);
    };
    const transport = new Transport({ url });
    const got: unknown[] = [];
    await assert.rejects(
      async () => {
        for await (const value of transport.ndjson({ method: 'POST', service: 'docdb', path: '/x' })) got.push(value);
      },
      { status: 409, code: 'conflict' },
    );
    assert.deepEqual(got, [{ id: '1' }, { id: '2' }]);
  });

  it('reports a stream cut by the server as network_error and a malformed line as invalid_response', async () => {
    handler = (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/x-ndjson' });
      response.write('{"id":"1"}\n');
      setTimeout(() => response.destroy(), 20);
    };
    const transport = new Transport({ url });
    const got: unknown[] = [];
    await assert.rejects(
      async () => {
        for await (const value of transport.ndjson({ method: 'POST', service: 'docdb', path: '/x' })) got.push(value);
      },
      { name: 'StratusError', status: 0, code: 'network_error' },
    );
    assert.deepEqual(got, [{ id: '1' }]);

    handler = (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/x-ndjson' });
      response.end('{"id":\n');
    };
    await assert.rejects(
      async () => {
        for await (const _value of transport.ndjson({ method: 'POST', service: 'docdb', path: '/x' })) continue;
      },
      { name: 'StratusError', status: 200, code: 'invalid_response' },
    );
  });

  it('parses Server-Sent Events and closes the connection when the loop is left', async () => {
    let closed: Promise<void> = Promise.resolve();
    handler = (_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(': ping\n\nevent: snapshot\ndata: {"a":1}\nid: 7\n\ndata: line one\ndata: line two\n\n');
      closed = new Promise((resolve) => response.on('close', resolve));
    };
    const events = [];
    for await (const event of new Transport({ url }).events({ method: 'GET', service: 'scheduler', path: '/s' })) {
      events.push(event);
      if (events.length === 2) break;
    }
    assert.deepEqual(events, [
      { event: 'snapshot', data: '{"a":1}', id: '7' },
      { event: 'message', data: 'line one\nline two', id: '7' },
    ]);
    await closed;
    assert.equal(seen[0]!.headers.accept, 'text/event-stream');
  });

  it('aborts a call with its signal, without retrying', async () => {
    handler = () => undefined; // never answers
    const controller = new AbortController();
    const call = createClient({ url, token: 't', retry: fast }).kv.listCollections({ signal: controller.signal });
    setTimeout(() => controller.abort(), 30);
    await assert.rejects(call, { name: 'AbortError' });
    assert.equal(seen.length, 1);
  });
});
