import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { EgressPolicy, egressAgent } from '../../../src/core/egress.ts';
import {
  DEFAULT_FETCH_LIMITS,
  FetchFailed,
  InvocationBudget,
  InvocationFetcher,
  type FetchLimits,
} from '../../../src/services/lambda/fetcher.ts';

// Issue 22, item 1: the host side of a lambda's fetch, against servers on loopback only.

describe('lambda fetch on the host', () => {
  let server: http.Server;
  let port: number;
  /** A second server standing for the platform's own port. */
  let own: http.Server;
  let ownPort: number;
  const seen: { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }[] = [];
  let inFlight = 0;
  let mostInFlight = 0;

  const listen = async (handler: http.RequestListener) => {
    const s = http.createServer(handler);
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    return s;
  };

  before(async () => {
    server = await listen((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        const url = new URL(req.url ?? '/', 'http://x');
        if (url.pathname === '/hello') return res.writeHead(200, { 'x-hello': 'yes' }).end('hello there');
        if (url.pathname === '/redirect')
          return res.writeHead(302, { location: url.searchParams.get('to') ?? '/hello' }).end();
        if (url.pathname === '/see-other') return res.writeHead(303, { location: '/hello' }).end();
        if (url.pathname === '/loop') return res.writeHead(307, { location: '/loop' }).end();
        if (url.pathname === '/big') return res.writeHead(200).end(Buffer.alloc(600_000, 1));
        if (url.pathname === '/slow') {
          inFlight++;
          mostInFlight = Math.max(mostInFlight, inFlight);
          return setTimeout(() => {
            inFlight--;
            res.writeHead(200).end('slow');
          }, 50);
        }
        if (url.pathname === '/gzip')
          return res.writeHead(200, { 'content-encoding': 'gzip' }).end(gzipSync('squeezed'));
        if (url.pathname === '/bomb')
          return res.writeHead(200, { 'content-encoding': 'gzip' }).end(gzipSync(Buffer.alloc(2_000_000)));
        if (url.pathname === '/hang') return; // never answers
        res.writeHead(404).end();
      });
    });
    port = (server.address() as AddressInfo).port;
    own = await listen((_req, res) => res.end('the platform'));
    ownPort = (own.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    own.closeAllConnections();
    await Promise.all([server, own].map((s) => new Promise((resolve) => s.close(resolve))));
  });

  const fetcher = (allow: string, limits: Partial<FetchLimits> = {}, timeMs = 5_000) => {
    const policy = new EgressPolicy({ allow, ownPorts: [ownPort] });
    return new InvocationFetcher(
      policy,
      egressAgent(policy),
      started(new InvocationBudget({ ...DEFAULT_FETCH_LIMITS, ...limits }), timeMs),
    );
  };
  const started = (budget: InvocationBudget, timeMs: number) => {
    budget.start(Date.now() + timeMs);
    return budget;
  };
  const get = (url: string) => ({ url, method: 'GET', headers: [] as [string, string][] });

  it('refuses loopback by default, by literal and by name, before any connection', async () => {
    const before = seen.length;
    const f = fetcher('');
    await assert.rejects(f.fetch(get(`http://127.0.0.1:${port}/hello`)), (error: unknown) => {
      assert.ok(error instanceof FetchFailed);
      assert.match(error.message, /127\.0\.0\.1 refused: a loopback address/);
      return true;
    });
    await assert.rejects(f.fetch(get(`http://[::1]:${port}/hello`)), /a loopback address/);
    await assert.rejects(
      f.fetch(get(`http://localhost:${port}/hello`)),
      /localhost \(.*\) refused: a loopback address/,
    );
    assert.equal(seen.length, before, 'the server saw nothing');
  });

  it('fetches from an allowed address: status, headers and body', async () => {
    const answer = await fetcher('127.0.0.1').fetch({
      url: `http://127.0.0.1:${port}/hello`,
      method: 'post',
      headers: [
        ['content-type', 'text/plain'],
        ['host', 'evil.example'],
      ],
      body: new TextEncoder().encode('ping'),
    });
    assert.equal(answer.status, 200);
    assert.equal(Buffer.from(answer.body).toString(), 'hello there');
    assert.ok(answer.headers.some(([name, value]) => name === 'x-hello' && value === 'yes'));
    assert.equal(answer.redirected, false);
    const request = seen.at(-1)!;
    assert.equal(request.method, 'POST');
    assert.equal(request.body, 'ping');
    assert.equal(request.headers.host, `127.0.0.1:${port}`, 'the lambda cannot choose the Host header');
  });

  it("never reaches the platform's own ports, even when the allow list covers them", async () => {
    await assert.rejects(fetcher('127.0.0.1').fetch(get(`http://127.0.0.1:${ownPort}/`)), /this platform's own port/);
    // Nor by a redirect from an allowed server.
    await assert.rejects(
      fetcher('127.0.0.1').fetch(
        get(`http://127.0.0.1:${port}/redirect?to=${encodeURIComponent(`http://127.0.0.1:${ownPort}/`)}`),
      ),
      /this platform's own port/,
    );
  });

  it('checks every redirect hop, turns 303 into a GET, and stops after five', async () => {
    // A hop to a loopback address the allow list does not cover is refused before it connects.
    // (Link-local, metadata and private addresses are refused by the same check; egress.test.ts
    // shows that on the policy itself, since no test may connect outside loopback.)
    const before = seen.length;
    const refused = fetcher('127.0.0.1').fetch(
      get(`http://127.0.0.1:${port}/redirect?to=${encodeURIComponent(`http://127.0.0.2:${port}/hello`)}`),
    );
    await assert.rejects(refused, /127\.0\.0\.2 refused: a loopback address/);
    assert.equal(seen.length, before + 1, 'only the first hop reached a server');
    const followed = await fetcher('127.0.0.1').fetch({
      url: `http://127.0.0.1:${port}/see-other`,
      method: 'POST',
      headers: [['content-type', 'text/plain']],
      body: new TextEncoder().encode('form'),
    });
    assert.equal(followed.status, 200);
    assert.equal(followed.redirected, true);
    assert.equal(followed.url, `http://127.0.0.1:${port}/hello`);
    assert.equal(seen.at(-1)!.method, 'GET');
    assert.equal(seen.at(-1)!.body, '');
    await assert.rejects(fetcher('127.0.0.1').fetch(get(`http://127.0.0.1:${port}/loop`)), /more than 5 redirects/);
    const manual = await fetcher('127.0.0.1').fetch({ ...get(`http://127.0.0.1:${port}/loop`), redirect: 'manual' });
    assert.equal(manual.status, 307);
  });

  it('keeps to the limits: requests, bytes, concurrency and time', async () => {
    const few = fetcher('127.0.0.1', { maxRequests: 2 });
    await few.fetch(get(`http://127.0.0.1:${port}/hello`));
    await few.fetch(get(`http://127.0.0.1:${port}/hello`));
    await assert.rejects(
      few.fetch(get(`http://127.0.0.1:${port}/hello`)),
      /at most 2 requests \(fetch and bindings\) per invocation/,
    );

    const small = fetcher('127.0.0.1', { maxResponseBytes: 1_000_000 });
    await small.fetch(get(`http://127.0.0.1:${port}/big`));
    await assert.rejects(small.fetch(get(`http://127.0.0.1:${port}/big`)), /response bodies over 1000000 bytes/);

    mostInFlight = 0;
    const many = fetcher('127.0.0.1', { maxConcurrent: 3 });
    await Promise.all(Array.from({ length: 9 }, () => many.fetch(get(`http://127.0.0.1:${port}/slow`))));
    assert.equal(mostInFlight, 3);

    await assert.rejects(fetcher('127.0.0.1', {}, 300).fetch(get(`http://127.0.0.1:${port}/hang`)), /time is up/);
  });

  it('aborts what is in flight when the invocation ends, and starts nothing after', async () => {
    const policy = new EgressPolicy({ allow: '127.0.0.1', ownPorts: [] });
    const budget = started(new InvocationBudget(), 5_000);
    const f = new InvocationFetcher(policy, egressAgent(policy), budget);
    const before = seen.length;
    const hanging = f.fetch(get(`http://127.0.0.1:${port}/hang`));
    // Closed once the request is in flight at the server (a fixed wait could end before that on a busy machine).
    for (const until = Date.now() + 5_000; seen.length === before && Date.now() < until;)
      await new Promise((resolve) => setTimeout(resolve, 5));
    budget.close();
    await assert.rejects(hanging, /time is up/);
    await assert.rejects(f.fetch(get(`http://127.0.0.1:${port}/hello`)), /time is up/);
    assert.equal(seen.length, before + 1, 'only the first request reached the server');
  });

  it('connects to the address the policy checked when the connection is made (no rebinding window)', async () => {
    // The name passes the check before the request, then answers a refused address when the
    // connection looks it up: the connection is refused, not made.
    let calls = 0;
    const policy = new EgressPolicy({
      allow: '127.0.0.1',
      ownPorts: [],
      resolver: async () => [{ address: calls++ === 0 ? '127.0.0.1' : '127.0.0.2', family: 4 }],
    });
    const before = seen.length;
    const rebinding = new InvocationFetcher(policy, egressAgent(policy), started(new InvocationBudget(), 5_000));
    await assert.rejects(
      rebinding.fetch(get(`http://rebind.test:${port}/hello`)),
      /127\.0\.0\.2\) refused: a loopback/,
    );
    assert.equal(calls, 2, 'looked up again for the connection');
    assert.equal(seen.length, before);
  });

  it('decodes compressed answers as fetch does, within the byte budget', async () => {
    const answer = await fetcher('127.0.0.1').fetch(get(`http://127.0.0.1:${port}/gzip`));
    assert.equal(Buffer.from(answer.body).toString(), 'squeezed');
    assert.ok(!answer.headers.some(([name]) => name === 'content-encoding' || name === 'content-length'));
    assert.equal(seen.at(-1)!.headers['accept-encoding'], 'gzip, deflate, br');
    assert.equal(seen.at(-1)!.headers['user-agent'], 'Stratus-Lambda');
    // A small compressed body that expands past the invocation's bytes is refused.
    await assert.rejects(
      fetcher('127.0.0.1', { maxResponseBytes: 1_000_000 }).fetch(get(`http://127.0.0.1:${port}/bomb`)),
      /response bodies over 1000000 bytes/,
    );
  });

  it('refuses what is not an http(s) URL', async () => {
    const f = fetcher('127.0.0.1');
    await assert.rejects(f.fetch(get('file:///etc/passwd')), /only http and https/);
    await assert.rejects(f.fetch(get('not a url')), /invalid URL/);
    await assert.rejects(f.fetch(get(`http://user:pw@127.0.0.1:${port}/`)), /credentials are refused/);
  });
});
