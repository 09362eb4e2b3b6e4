import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { createUpstreamProxy, stripHopByHop } from '../../src/gateway/proxy.ts';
import { hopByHopHeaderNames } from '../../src/gateway/headers.ts';
import type { ForwardInfo, UpstreamProxy, UpstreamProxyOptions } from '../../src/gateway/proxy.ts';

const TEST_TIMEOUT = { timeout: 15_000 };

/** Everything a test opens, closed in `after` whatever happened. */
const cleanups: Array<() => Promise<void>> = [];

after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function listen(server: http.Server | net.Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        if (server instanceof http.Server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return (server.address() as AddressInfo).port;
}

async function upstream(handler: http.RequestListener): Promise<string> {
  const port = await listen(http.createServer(handler));
  return `http://127.0.0.1:${port}`;
}

interface Front {
  port: number;
  proxy: UpstreamProxy;
  /** Settles with each `forward` call, to check that it resolves. */
  forwards: Array<Promise<void>>;
  requests: http.IncomingMessage[];
}

/** The front server: every request goes to `proxy.forward`, as the gateway does for a remote upstream. */
async function front(
  baseUrl: string,
  options?: UpstreamProxyOptions,
  info?: ForwardInfo,
  prepare?: (req: http.IncomingMessage) => void,
): Promise<Front> {
  const proxy = createUpstreamProxy(baseUrl, options);
  const forwards: Array<Promise<void>> = [];
  const requests: http.IncomingMessage[] = [];
  const server = http.createServer((req, res) => {
    prepare?.(req);
    requests.push(req);
    forwards.push(proxy.forward(req, res, info));
  });
  const port = await listen(server);
  cleanups.push(() => proxy.close());
  return { port, proxy, forwards, requests };
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
  /** The whole response arrived (false when the connection was cut mid-body). */
  complete: boolean;
}

interface Call {
  method?: string;
  path?: string;
  headers?: http.OutgoingHttpHeaders;
  body?: Buffer | string;
  /** Send the body in two writes (chunked framing) rather than with a Content-Length. */
  chunked?: boolean;
}

/** A request through node:http (it can set Host), bounded in time. */
function call(port: number, options: Call = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'GET',
        path: options.path ?? '/',
        headers: options.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        const done = () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            rawHeaders: res.rawHeaders,
            body: Buffer.concat(chunks),
            complete: res.complete,
          });
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', done);
        // A cut connection: 'aborted'/'error' (depending on the Node line), then 'close' without 'end'.
        res.on('error', () => undefined);
        res.on('close', () => {
          if (!res.complete) done();
        });
      },
    );
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('request timed out')));
    if (options.chunked && options.body !== undefined) {
      const body = Buffer.from(options.body);
      req.write(body.subarray(0, 1));
      req.end(body.subarray(1));
    } else {
      req.end(options.body);
    }
  });
}

function json(answer: Answer): unknown {
  return JSON.parse(answer.body.toString('utf8'));
}

/** Rejects when `promise` takes longer than `ms`: a proxy that buffers shows up as a timeout. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** An upstream that answers with what it received. */
const echo: http.RequestListener = (req, res) => {
  const hash = createHash('sha256');
  let length = 0;
  req.on('data', (chunk: Buffer) => {
    hash.update(chunk);
    length += chunk.length;
  });
  req.on('end', () => {
    res.setHeader('content-type', 'application/json');
    res.setHeader('set-cookie', ['a=1; Path=/', 'b=2; HttpOnly', 'c=3']);
    res.end(
      JSON.stringify({
        method: req.method,
        url: req.url,
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        length,
        sha256: hash.digest('hex'),
      }),
    );
  });
};

interface Echoed {
  method: string;
  url: string;
  headers: Record<string, string | string[]>;
  rawHeaders: string[];
  length: number;
  sha256: string;
}

describe('hop-by-hop helpers', () => {
  it('names the fixed hop-by-hop headers and those listed in Connection', () => {
    const headers = {
      connection: 'keep-alive, X-Private , close',
      'keep-alive': 'timeout=5',
      'x-private': '1',
      te: 'trailers',
      'x-kept': 'yes',
      upgrade: 'h2c',
    };
    assert.deepEqual([...hopByHopHeaderNames(headers)].sort(), [
      'connection',
      'keep-alive',
      'te',
      'upgrade',
      'x-private',
    ]);
    assert.deepEqual(stripHopByHop(headers), { 'x-kept': 'yes' });
  });

  it('returns the same empty list when there is nothing to strip', () => {
    assert.equal(hopByHopHeaderNames({ host: 'a' }), hopByHopHeaderNames({ 'x-b': 'c' }));
    assert.equal(hopByHopHeaderNames({ host: 'a' }).length, 0);
  });

  it('handles a multi-valued Connection header', () => {
    assert.deepEqual([...hopByHopHeaderNames({ connection: ['x-a', 'x-b'], 'x-a': '1', 'x-b': '2' })].sort(), [
      'connection',
      'x-a',
      'x-b',
    ]);
  });
});

describe('upstream proxy', () => {
  it('rejects a base URL that is not an origin', () => {
    assert.throws(() => createUpstreamProxy('http://127.0.0.1:9000/prefix'), /origin/);
    assert.throws(() => createUpstreamProxy('ftp://127.0.0.1:9000'), /origin/);
  });

  it(
    'forwards method, path, query, headers and Host unchanged; repeated set-cookie comes back',
    TEST_TIMEOUT,
    async () => {
      let upstreamHeadersAt: { elapsedMs: number; status: number } | undefined;
      const { port, forwards, requests } = await front(
        await upstream(echo),
        {},
        { onUpstreamHeaders: (elapsedMs, status) => (upstreamHeadersAt = { elapsedMs, status }) },
      );
      const longQuery = 'q=' + 'x'.repeat(6_000);
      const path = `/a/../b//c/%7Euser/%2F?${longQuery}&k=a%20b&k=c&empty=&plus=1+1`;
      const answer = await call(port, {
        method: 'PATCH',
        path,
        headers: {
          host: 'docdb.localhost:8080',
          'x-multi': ['one', 'two'],
          'x-case': 'Value',
          accept: 'application/json',
          'content-type': 'text/plain',
        },
        body: 'hello',
      });
      assert.equal(answer.status, 200);
      const seen = json(answer) as Echoed;
      assert.equal(seen.method, 'PATCH');
      assert.equal(seen.url, path);
      assert.equal(seen.headers.host, 'docdb.localhost:8080');
      assert.equal(seen.headers['x-multi'], 'one, two');
      assert.equal(seen.headers['x-case'], 'Value');
      assert.equal(seen.headers['content-type'], 'text/plain');
      assert.equal(seen.headers['content-length'], '5');
      assert.equal(seen.length, 5);
      assert.equal(seen.sha256, createHash('sha256').update('hello').digest('hex'));
      assert.deepEqual(answer.headers['set-cookie'], ['a=1; Path=/', 'b=2; HttpOnly', 'c=3']);
      assert.equal(answer.headers['content-type'], 'application/json');
      assert.deepEqual(
        upstreamHeadersAt && { status: upstreamHeadersAt.status, positive: upstreamHeadersAt.elapsedMs >= 0 },
        { status: 200, positive: true },
      );
      await within(Promise.all(forwards), 2_000, 'forward() to resolve');
      // The access log may still want the client address once the body has been sent upstream.
      assert.ok(requests[0]?.socket instanceof net.Socket, 'req.socket was left null');
    },
  );

  it('sends no body for a GET and keeps the method of a HEAD', TEST_TIMEOUT, async () => {
    const { port } = await front(await upstream(echo));
    const get = json(await call(port, { path: '/get' })) as Echoed;
    assert.equal(get.length, 0);
    assert.equal(get.headers['transfer-encoding'], undefined);
    assert.equal(get.headers['content-length'], undefined);
    const head = await call(port, { method: 'HEAD', path: '/head' });
    assert.equal(head.status, 200);
    assert.equal(head.body.length, 0);
  });

  it('strips hop-by-hop headers on the way up, including one named in Connection', TEST_TIMEOUT, async () => {
    const { port } = await front(await upstream(echo));
    const answer = await call(port, {
      method: 'POST',
      path: '/hop',
      chunked: true,
      body: 'payload',
      headers: {
        connection: 'keep-alive, X-Secret-Hop',
        'x-secret-hop': 'must not pass',
        'keep-alive': 'timeout=5',
        'proxy-connection': 'keep-alive',
        'proxy-authorization': 'Basic Zm9vOmJhcg==',
        te: 'trailers',
        trailer: 'x-checksum',
        upgrade: 'h2c',
        'x-kept': 'yes',
      },
    });
    const seen = json(answer) as Echoed;
    for (const name of ['x-secret-hop', 'proxy-connection', 'proxy-authorization', 'te', 'trailer', 'upgrade']) {
      assert.equal(seen.headers[name], undefined, `${name} reached the upstream`);
      assert.ok(!seen.rawHeaders.some((raw) => raw.toLowerCase() === name), `${name} in upstream rawHeaders`);
    }
    assert.notEqual(seen.headers['keep-alive'], 'timeout=5');
    assert.equal(seen.headers['x-kept'], 'yes');
    assert.equal(seen.length, 7);
  });

  it('strips hop-by-hop headers on the way back', TEST_TIMEOUT, async () => {
    const base = await upstream((_req, res) => {
      res.setHeader('connection', 'keep-alive, X-Up-Hop');
      res.setHeader('x-up-hop', 'must not pass');
      res.setHeader('keep-alive', 'timeout=77');
      res.setHeader('proxy-authenticate', 'Basic realm="x"');
      res.setHeader('trailer', 'x-checksum');
      res.setHeader('x-kept', 'yes');
      res.write('chunked ');
      res.end('body');
    });
    const { port } = await front(base);
    const answer = await call(port, { path: '/' });
    assert.equal(answer.body.toString(), 'chunked body');
    assert.equal(answer.headers['x-up-hop'], undefined);
    assert.equal(answer.headers['proxy-authenticate'], undefined);
    assert.equal(answer.headers.trailer, undefined);
    assert.notEqual(answer.headers['keep-alive'], 'timeout=77');
    assert.equal(answer.headers['x-kept'], 'yes');
  });

  it('passes an Expect: 100-continue upload', TEST_TIMEOUT, async () => {
    const { port } = await front(await upstream(echo));
    const answer = await new Promise<Answer>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'PUT',
          path: '/continue',
          headers: { expect: '100-continue', 'content-length': '3' },
          agent: false,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              rawHeaders: res.rawHeaders,
              body: Buffer.concat(chunks),
              complete: true,
            }),
          );
        },
      );
      req.on('continue', () => req.end('abc'));
      req.on('error', reject);
      req.setTimeout(5_000, () => req.destroy(new Error('timed out')));
    });
    assert.equal(answer.status, 200);
    const seen = json(answer) as Echoed;
    assert.equal(seen.length, 3);
    assert.equal(seen.headers.expect, undefined);
  });

  it('streams a 5 MiB upload: the upstream reads it while the client is still sending', TEST_TIMEOUT, async () => {
    const firstMiB = deferred();
    const base = await upstream((req, res) => {
      const hash = createHash('sha256');
      let length = 0;
      req.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        length += chunk.length;
        if (length >= 1024 * 1024) firstMiB.resolve();
      });
      req.on('end', () =>
        res.end(JSON.stringify({ length, sha256: hash.digest('hex'), te: req.headers['transfer-encoding'] ?? null })),
      );
    });
    const { port } = await front(base);
    const body = Buffer.alloc(5 * 1024 * 1024);
    for (let i = 0; i < body.length; i += 4) body.writeUInt32LE(i, i);
    const answer = new Promise<Answer>((resolve, reject) => {
      // No Content-Length: a chunked upload, so the length is unknown to every hop.
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/upload', agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            rawHeaders: res.rawHeaders,
            body: Buffer.concat(chunks),
            complete: true,
          }),
        );
      });
      req.on('error', reject);
      const write = async () => {
        const half = 2 * 1024 * 1024;
        for (let offset = 0; offset < body.length; offset += 64 * 1024) {
          // Hold back the rest until the upstream has seen the first MiB: a buffering proxy deadlocks here.
          if (offset === half)
            await within(firstMiB.promise, 5_000, 'the upstream to receive the first MiB before the upload ends');
          if (!req.write(body.subarray(offset, offset + 64 * 1024))) await once(req, 'drain');
        }
        req.end();
      };
      write().catch((error: unknown) => {
        req.destroy();
        reject(error as Error);
      });
    });
    const result = json(await answer) as { length: number; sha256: string; te: string | null };
    assert.equal(result.length, body.length);
    assert.equal(result.sha256, createHash('sha256').update(body).digest('hex'));
    assert.equal(result.te, 'chunked');
  });

  it(
    'forwards a chunked body when the gateway has removed Transfer-Encoding, and none for a GET',
    TEST_TIMEOUT,
    async () => {
      // As the gateway does before handing the request over: framing headers gone from req.headers.
      const { port } = await front(await upstream(echo), {}, undefined, (req) => {
        delete req.headers['transfer-encoding'];
      });
      const payload = Buffer.from('x'.repeat(100_000));
      const post = await new Promise<Answer>((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/te', agent: false }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              rawHeaders: res.rawHeaders,
              body: Buffer.concat(chunks),
              complete: true,
            }),
          );
        });
        req.on('error', reject);
        req.write(payload.subarray(0, 10));
        setTimeout(() => req.end(payload.subarray(10)), 50);
      });
      assert.equal((json(post) as Echoed).length, payload.length);
      const get = json(await call(port, { path: '/te-get' })) as Echoed;
      assert.equal(get.length, 0);
      assert.equal(get.headers['transfer-encoding'], undefined);
      const del = json(await call(port, { method: 'DELETE', path: '/te-delete' })) as Echoed;
      assert.equal(del.length, 0);
      assert.equal(del.headers['transfer-encoding'], undefined);
    },
  );

  it('delivers NDJSON lines as they arrive', TEST_TIMEOUT, async () => {
    const firstLineSeen = deferred();
    const base = await upstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write('{"n":1}\n');
      // The last line waits for the client to have the first one.
      firstLineSeen.promise.then(
        () => {
          res.write('{"n":2}\n');
          res.end('{"n":3}\n');
        },
        () => undefined,
      );
    });
    const { port } = await front(base);
    const lines = await within(
      new Promise<string[]>((resolve, reject) => {
        const req = http.get({ host: '127.0.0.1', port, path: '/stream', agent: false }, (res) => {
          assert.equal(res.headers['content-type'], 'application/x-ndjson');
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            text += chunk;
            if (text.includes('\n')) firstLineSeen.resolve();
          });
          res.on('end', () => resolve(text.trim().split('\n')));
        });
        req.on('error', reject);
      }),
      5_000,
      'the first NDJSON line before the upstream sends the last',
    );
    assert.deepEqual(lines, ['{"n":1}', '{"n":2}', '{"n":3}']);
  });

  it('shows the headers of an event stream before its first event', TEST_TIMEOUT, async () => {
    const headersSeen = deferred();
    const base = await upstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.flushHeaders();
      headersSeen.promise.then(
        () => res.end('data: hello\n\n'),
        () => undefined,
      );
    });
    const { port } = await front(base);
    const text = await within(
      new Promise<string>((resolve, reject) => {
        const req = http.get({ host: '127.0.0.1', port, path: '/events', agent: false }, (res) => {
          assert.equal(res.headers['content-type'], 'text/event-stream');
          headersSeen.resolve();
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolve(body));
        });
        req.on('error', reject);
      }),
      5_000,
      'the event-stream headers before the first event',
    );
    assert.equal(text, 'data: hello\n\n');
  });

  it('applies back-pressure from a slow client to the upstream', TEST_TIMEOUT, async () => {
    const total = 64 * 1024 * 1024;
    let written = 0;
    const base = await upstream(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': total });
      const chunk = Buffer.alloc(64 * 1024, 1);
      while (written < total) {
        written += chunk.length;
        if (!res.write(chunk)) await once(res, 'drain');
      }
      res.end();
    });
    const { port } = await front(base);
    const received = await within(
      new Promise<number>((resolve, reject) => {
        const req = http.get({ host: '127.0.0.1', port, path: '/big', agent: false }, (res) => {
          res.pause();
          setTimeout(() => {
            // Socket buffers on four hops hold a few MiB; without back-pressure all 64 would be gone.
            assert.ok(written < 40 * 1024 * 1024, `upstream wrote ${written} bytes to a paused client`);
            let length = 0;
            res.on('data', (c: Buffer) => (length += c.length));
            res.on('end', () => resolve(length));
            res.resume();
          }, 500);
        });
        req.on('error', reject);
      }),
      10_000,
      'the large response',
    );
    assert.equal(received, total);
  });

  it('aborts the upstream request when the client disconnects mid-stream', TEST_TIMEOUT, async () => {
    const upstreamClosed = deferred();
    const base = await upstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write('{"tick":1}\n');
      res.on('close', () => upstreamClosed.resolve());
    });
    const { port, forwards } = await front(base);
    await new Promise<void>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/follow', agent: false }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => undefined);
      req.setTimeout(5_000, () => reject(new Error('no first chunk')));
    });
    await within(upstreamClosed.promise, 5_000, 'the upstream to see its client go away');
    await within(Promise.all(forwards), 2_000, 'forward() to resolve');
  });

  it('aborts the upstream request when the client disconnects before the response headers', TEST_TIMEOUT, async () => {
    const upstreamGotRequest = deferred();
    const upstreamClosed = deferred();
    const base = await upstream((_req, res) => {
      upstreamGotRequest.resolve();
      res.on('close', () => upstreamClosed.resolve());
    });
    const { port, forwards } = await front(base);
    const req = http.get({ host: '127.0.0.1', port, path: '/slow', agent: false });
    req.on('error', () => undefined);
    await within(upstreamGotRequest.promise, 5_000, 'the request to reach the upstream');
    req.destroy();
    await within(upstreamClosed.promise, 5_000, 'the upstream to see its client go away');
    await within(Promise.all(forwards), 2_000, 'forward() to resolve');
  });

  it('resolves at once when the client left before forward() was called', TEST_TIMEOUT, async () => {
    let upstreamCalls = 0;
    const base = await upstream((_req, res) => {
      upstreamCalls++;
      res.end();
    });
    const proxy = createUpstreamProxy(base);
    cleanups.push(() => proxy.close());
    const clientLeft = deferred();
    let forwarded: Promise<void> | undefined;
    // As the gateway does after an asynchronous step (a project lookup) that outlived the client.
    const port = await listen(
      http.createServer((req, res) => {
        res.once('close', () => {
          forwarded = proxy.forward(req, res);
          clientLeft.resolve();
        });
      }),
    );
    const req = http.get({ host: '127.0.0.1', port, path: '/gone', agent: false });
    req.on('error', () => undefined);
    req.on('socket', (socket) => socket.on('connect', () => setTimeout(() => req.destroy(), 20)));
    await within(clientLeft.promise, 5_000, 'the client to leave');
    await within(forwarded ?? Promise.reject(new Error('forward() not called')), 1_000, 'forward() to resolve');
    assert.equal(upstreamCalls, 0);
  });

  it('answers 502 bad_gateway when the upstream port is closed', TEST_TIMEOUT, async () => {
    const errors: Error[] = [];
    const { port, forwards } = await front(
      `http://127.0.0.1:${await closedPort()}`,
      {},
      { onUpstreamError: (error) => errors.push(error) },
    );
    const answer = await call(port, { method: 'POST', path: '/x', body: 'payload' });
    assert.equal(answer.status, 502);
    assert.match(String(answer.headers['content-type']), /^application\/json/);
    const body = json(answer) as { error: { status: number; code: string; message: string } };
    assert.equal(body.error.status, 502);
    assert.equal(body.error.code, 'bad_gateway');
    assert.equal(body.error.message, 'upstream unreachable');
    assert.equal(errors.length, 1);
    await within(Promise.all(forwards), 2_000, 'forward() to resolve');
  });

  it('answers 502 when the upstream resets the connection before the headers', TEST_TIMEOUT, async () => {
    const server = net.createServer((socket) => {
      socket.once('data', () => socket.resetAndDestroy());
      socket.on('error', () => undefined);
    });
    const upstreamPort = await listen(server);
    const { port } = await front(`http://127.0.0.1:${upstreamPort}`);
    const answer = await call(port, { path: '/reset' });
    assert.equal(answer.status, 502);
    assert.deepEqual(json(answer), {
      error: { status: 502, code: 'bad_gateway', message: 'upstream connection failed before the response' },
    });
  });

  it('answers 504 gateway_timeout when the upstream sends no headers in time', TEST_TIMEOUT, async () => {
    const base = await upstream(() => undefined);
    const { port } = await front(base, { headersTimeoutMs: 200 });
    const started = Date.now();
    const answer = await call(port, { path: '/never' });
    assert.equal(answer.status, 504);
    assert.match(String(answer.headers['content-type']), /^application\/json/);
    assert.deepEqual(json(answer), {
      error: { status: 504, code: 'gateway_timeout', message: 'upstream did not answer in time' },
    });
    assert.ok(Date.now() - started < 5_000);
  });

  it('cuts the client connection when the upstream dies after the headers (chunked)', TEST_TIMEOUT, async () => {
    const base = await upstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('partial');
      setTimeout(() => res.socket?.destroy(), 50);
    });
    const { port, forwards } = await front(base);
    const answer = await within(call(port, { path: '/crash' }), 5_000, 'the truncated response');
    assert.equal(answer.status, 200);
    assert.equal(answer.complete, false);
    assert.equal(answer.body.toString(), 'partial');
    await within(Promise.all(forwards), 2_000, 'forward() to resolve');
  });

  it('cuts the client connection when the upstream dies short of its Content-Length', TEST_TIMEOUT, async () => {
    const base = await upstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 1000 });
      res.write('only ten b');
      setTimeout(() => res.socket?.destroy(), 50);
    });
    const { port } = await front(base);
    const answer = await within(call(port, { path: '/short' }), 5_000, 'the truncated response');
    assert.equal(answer.status, 200);
    assert.equal(answer.complete, false);
    assert.ok(answer.body.length < 1000);
  });

  it(
    'returns bodies byte for byte: in one piece of any size, in several writes, and with no Content-Length',
    TEST_TIMEOUT,
    async () => {
      // Every byte value, so that a text conversion on the way would show (the small body goes
      // out joined to the head: proxy.ts, onResponseEnd).
      const bytes = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 7 + 3) % 256));
      const small = bytes(512);
      const medium = bytes(8 * 1024);
      const large = bytes(256 * 1024);
      const base = await upstream((req, res) => {
        if (req.url === '/small') res.writeHead(200, { 'content-length': small.length }).end(small);
        else if (req.url === '/medium') res.writeHead(200, { 'content-length': medium.length }).end(medium);
        else if (req.url === '/large') res.writeHead(200, { 'content-length': large.length }).end(large);
        else if (req.url === '/pieces') {
          res.writeHead(200, { 'content-length': small.length });
          res.write(small.subarray(0, 100));
          setTimeout(() => res.end(small.subarray(100)), 20);
        } else if (req.url === '/empty') res.writeHead(204).end();
        else {
          // Two writes and no length: chunked framing.
          res.write(small.subarray(0, 200));
          setTimeout(() => res.end(small.subarray(200)), 20);
        }
      });
      const { port, forwards } = await front(base);
      for (const [path, expected] of [
        ['/small', small],
        ['/medium', medium],
        ['/large', large],
        ['/pieces', small],
        ['/chunked', small],
      ] as const) {
        const answer = await call(port, { path });
        assert.equal(answer.status, 200, path);
        assert.equal(answer.complete, true, path);
        assert.ok(answer.body.equals(expected), `${path}: body differs`);
      }
      const empty = await call(port, { path: '/empty' });
      assert.equal(empty.status, 204);
      assert.equal(empty.body.length, 0);
      await within(Promise.all(forwards), 2_000, 'forward() to resolve');
    },
  );

  it(
    'reads every framing an upstream may use: chunked with extensions and trailers, 1xx first, close-delimited',
    TEST_TIMEOUT,
    async () => {
      // A raw upstream, to write answers byte for byte. Each connection answers its requests in turn.
      const answers: Record<string, string> = {
        '/chunked':
          'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n' +
          '5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nx-trailer: t\r\n\r\n',
        '/early': 'HTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok',
        '/close': 'HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end',
        '/http10': 'HTTP/1.0 200 OK\r\n\r\nold style',
        '/garbage': 'NOT HTTP AT ALL\r\n\r\n',
        '/both': 'HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n',
      };
      const connections: net.Socket[] = [];
      const server = net.createServer((socket) => {
        connections.push(socket);
        let pending = '';
        socket.on('data', (chunk: Buffer) => {
          pending += chunk.toString('latin1');
          for (let end = pending.indexOf('\r\n\r\n'); end >= 0; end = pending.indexOf('\r\n\r\n')) {
            const path = pending.split(' ')[1] ?? '';
            pending = pending.slice(end + 4);
            const answer = answers[path] ?? 'HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n';
            socket.write(answer);
            if (path === '/close' || path === '/http10' || path === '/garbage') socket.end();
          }
        });
        socket.on('error', () => undefined);
      });
      const port = await listen(server);
      const { port: frontPort, forwards } = await front(`http://127.0.0.1:${port}`);
      const chunked = await call(frontPort, { path: '/chunked' });
      assert.equal(chunked.status, 200);
      assert.equal(chunked.body.toString(), 'hello, world');
      assert.equal(chunked.headers['x-trailer'], undefined);
      const again = await call(frontPort, { path: '/chunked' });
      assert.equal(again.body.toString(), 'hello, world');
      assert.equal(connections.length, 1, 'a chunked answer read to its end leaves the connection reusable');
      const early = await call(frontPort, { path: '/early' });
      assert.equal(early.status, 200);
      assert.equal(early.body.toString(), 'ok');
      for (const [path, body] of [
        ['/close', 'until the end'],
        ['/http10', 'old style'],
      ]) {
        const answer = await call(frontPort, { path });
        assert.equal(answer.status, 200, path);
        assert.equal(answer.complete, true, path);
        assert.equal(answer.body.toString(), body, path);
      }
      for (const path of ['/garbage', '/both']) {
        const answer = await call(frontPort, { path });
        assert.equal(answer.status, 502, path);
        assert.equal((json(answer) as { error: { code: string } }).error.code, 'bad_gateway', path);
      }
      await within(Promise.all(forwards), 2_000, 'forward() to resolve');
    },
  );

  it(
    'sends a bodiless request once more when a kept-alive connection closes as it is reused, unless it is a POST',
    TEST_TIMEOUT,
    async () => {
      // Each connection answers its first request and drops the second unanswered, as an upstream
      // that closed an idle connection just as the proxy wrote to it.
      let connections = 0;
      const server = net.createServer((socket) => {
        connections++;
        let requests = 0;
        let pending = '';
        socket.on('data', (chunk: Buffer) => {
          pending += chunk.toString('latin1');
          for (let end = pending.indexOf('\r\n\r\n'); end >= 0; end = pending.indexOf('\r\n\r\n')) {
            pending = pending.slice(end + 4);
            if (++requests === 1) socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
            else socket.destroy();
          }
        });
        socket.on('error', () => undefined);
      });
      const port = await listen(server);
      const { port: frontPort } = await front(`http://127.0.0.1:${port}`);
      assert.equal((await call(frontPort, { path: '/one' })).body.toString(), 'ok');
      const second = await call(frontPort, { path: '/two' });
      assert.equal(second.status, 200);
      assert.equal(second.body.toString(), 'ok');
      assert.equal(connections, 2);
      // A POST may have been acted on before the upstream went away: it is not sent again, and the
      // client is told the gateway failed instead.
      const post = await call(frontPort, { path: '/three', method: 'POST', headers: { 'content-length': '0' } });
      assert.equal(post.status, 502);
      assert.equal((json(post) as { error: { code: string } }).error.code, 'bad_gateway');
      assert.equal(connections, 2);
    },
  );

  it('reuses pooled connections and answers 502 once closed', TEST_TIMEOUT, async () => {
    const sockets = new Set<unknown>();
    const base = await upstream((req, res) => {
      sockets.add(req.socket);
      res.end('ok');
    });
    const { port, proxy } = await front(base);
    for (let i = 0; i < 5; i++) assert.equal((await call(port, { path: `/n${i}` })).body.toString(), 'ok');
    assert.equal(sockets.size, 1);
    await within(proxy.close(), 3_000, 'close()');
    assert.equal((await call(port, { path: '/after-close' })).status, 502);
  });
});
