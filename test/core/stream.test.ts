import { test } from 'node:test';
import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { StreamClosedError, ndjsonLine, openNdjson, openSse } from '../../src/core/stream.ts';
import type { NdjsonWriter, SseWriter } from '../../src/core/stream.ts';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** Real HTTP server on 127.0.0.1:0, closed (with its connections) when the test ends. */
async function startServer(t: TestContext, handler: Handler): Promise<number> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return (server.address() as AddressInfo).port;
}

/** Polls until cond() holds; fails the test after `timeoutMs` instead of hanging. */
async function waitUntil(cond: () => boolean, what: string, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** Resolves when `read()` has not changed for `quietMs` (e.g. a blocked producer). */
async function waitForPlateau(read: () => number, quietMs = 100, timeoutMs = 3000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let last = read();
  let since = Date.now();
  while (Date.now() - since < quietMs) {
    if (Date.now() > deadline) throw new Error(`value kept growing (${read()})`);
    await sleep(10);
    const now = read();
    if (now !== last) {
      last = now;
      since = Date.now();
    }
  }
  return last;
}

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

interface RawClient {
  socket: net.Socket;
  /** Every byte received so far. */
  bytes(): Buffer;
  /** Number of bytes received so far (cheap to poll). */
  received(): number;
  closed: Promise<void>;
}

/** A bare TCP client, so tests control reading (pause/resume) and see the exact bytes. */
async function rawGet(t: TestContext, port: number, path: string, keepAlive = false): Promise<RawClient> {
  const socket = net.connect(port, '127.0.0.1');
  t.after(() => {
    socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const chunks: Buffer[] = [];
  let received = 0;
  socket.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    received += chunk.length;
  });
  socket.on('error', () => {}); // resets after destroy() are expected
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: ${keepAlive ? 'keep-alive' : 'close'}\r\n\r\n`);
  return { socket, bytes: () => Buffer.concat(chunks), received: () => received, closed };
}

/** Splits a raw HTTP/1.1 response and decodes its chunked body. */
function parseResponse(raw: Buffer): { head: string; body: string; complete: boolean } {
  const sep = raw.indexOf('\r\n\r\n');
  if (sep < 0) return { head: '', body: '', complete: false };
  const head = raw.subarray(0, sep).toString('latin1');
  assert.match(head, /\r\ntransfer-encoding: chunked/i);
  const parts: Buffer[] = [];
  let pos = sep + 4;
  for (;;) {
    const eol = raw.indexOf('\r\n', pos);
    if (eol < 0) break;
    const size = Number.parseInt(raw.subarray(pos, eol).toString('latin1'), 16);
    if (size === 0) return { head, body: Buffer.concat(parts).toString('utf8'), complete: raw.length >= eol + 4 };
    if (raw.length < eol + 2 + size + 2) break;
    parts.push(raw.subarray(eol + 2, eol + 2 + size));
    pos = eol + 2 + size + 2;
  }
  return { head, body: Buffer.concat(parts).toString('utf8'), complete: false };
}

/** GET with node's own client; yields the response plus a live view of the decoded body. */
async function httpGet(
  t: TestContext,
  port: number,
  path: string,
): Promise<{ res: IncomingMessage; body: () => string; done: Promise<void> }> {
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent: false }, resolve);
    req.on('error', reject);
    t.after(() => {
      req.destroy();
    });
  });
  res.setEncoding('utf8');
  let text = '';
  res.on('data', (chunk: string) => {
    text += chunk;
  });
  const done = new Promise<void>((resolve, reject) => {
    res.on('end', resolve);
    res.on('error', reject);
  });
  return { res, body: () => text, done };
}

const BIG = 'x'.repeat(64 * 1024);
const RUNAWAY_LIMIT = 1000;

/** Writes every item of `source` to `writer` until the client leaves, then ends both. */
async function pump(writer: NdjsonWriter, source: AsyncIterable<unknown>): Promise<void> {
  try {
    for await (const item of source) {
      if (writer.closed) break;
      try {
        await writer.write(item);
      } catch (err) {
        if (err instanceof StreamClosedError) break;
        throw err;
      }
    }
  } finally {
    writer.end();
  }
}

test('ndjsonLine: JSON text and a line feed; TypeError for what JSON cannot represent', () => {
  assert.equal(ndjsonLine({ a: 'x\ny', b: [1, null] }), '{"a":"x\\ny","b":[1,null]}\n');
  assert.equal(ndjsonLine('s'), '"s"\n');
  assert.throws(() => ndjsonLine(undefined), TypeError);
  assert.throws(() => ndjsonLine(() => 1), TypeError);
  assert.throws(() => ndjsonLine(1n), TypeError);
});

test('ndjson: values arrive line by line while the stream is open and parse back', async (t) => {
  const values: unknown[] = [{ a: 1, nested: { b: [1, 2] } }, [1, 'two', null], 'héllo ✓ \n newline', 42, null, true];
  let serverRes: ServerResponse | undefined;
  let received: unknown[] = [];
  const port = await startServer(t, (_req, res) => {
    serverRes = res;
    const writer = openNdjson(res);
    void (async () => {
      for (const [i, value] of values.entries()) {
        await writer.write(value);
        // Proves streaming: the next value is only written after the client has parsed this one.
        await waitUntil(() => received.length > i, `line ${i}`);
      }
      writer.end();
    })();
  });

  const { res, body, done } = await httpGet(t, port, '/');
  res.on('data', () => {
    const text = body();
    received = text
      .slice(0, text.lastIndexOf('\n') + 1)
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as unknown);
  });
  await done;

  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'application/x-ndjson; charset=utf-8');
  assert.equal(res.headers['cache-control'], 'no-cache');
  assert.equal(res.headers['x-accel-buffering'], 'no');
  assert.equal(serverRes?.getHeader('connection'), undefined, 'writer must not set hop-by-hop headers');
  assert.deepEqual(received, values);
  assert.equal(body(), values.map((v) => JSON.stringify(v) + '\n').join(''));
});

test('ndjson: status and header options, unserialisable values, writes after end', async (t) => {
  const results = deferred<{ undef: unknown; fn: unknown; bigint: unknown; afterEnd: unknown; writer: NdjsonWriter }>();
  const port = await startServer(t, (_req, res) => {
    const writer = openNdjson(res, { status: 201, headers: { 'X-Test': 'yes', 'Cache-Control': 'no-store' } });
    void (async () => {
      const settle = (p: Promise<void>): Promise<unknown> =>
        p.then(
          () => 'resolved',
          (err: unknown) => err,
        );
      const undef = await settle(writer.write(undefined));
      const fn = await settle(writer.write(() => 1));
      const bigint = await settle(writer.write(1n));
      await writer.write({ ok: true });
      writer.end();
      writer.end(); // idempotent
      const afterEnd = await settle(writer.write(1));
      results.resolve({ undef, fn, bigint, afterEnd, writer });
    })();
  });
  const { res, body, done } = await httpGet(t, port, '/');
  await done;
  const r = await results.promise;

  assert.equal(res.statusCode, 201);
  assert.equal(res.headers['x-test'], 'yes');
  assert.equal(res.headers['cache-control'], 'no-store');
  assert.equal(body(), '{"ok":true}\n');
  assert.ok(r.undef instanceof TypeError);
  assert.ok(r.fn instanceof TypeError);
  assert.ok(r.bigint instanceof TypeError);
  assert.ok(r.afterEnd instanceof StreamClosedError);
  assert.ok(r.writer.closed);
  assert.ok(r.writer.signal.aborted);
  assert.ok(r.writer.signal.reason instanceof StreamClosedError);
});

test('ndjson: back-pressure bounds the producer while the reader is paused', async (t) => {
  let produced = 0;
  const opened = deferred<NdjsonWriter>();
  const port = await startServer(t, (_req, res) => {
    const writer = openNdjson(res);
    opened.resolve(writer);
    void pump(
      writer,
      (async function* () {
        // Runaway guard: a writer that ignores back-pressure fails the bound below instead of
        // starving the event loop until the heap is exhausted.
        while (produced < RUNAWAY_LIMIT) {
          produced++;
          yield { i: produced, pad: BIG };
        }
      })(),
    );
  });

  const client = await rawGet(t, port, '/');
  client.socket.pause();
  const writer = await opened.promise;

  // With the reader paused the producer must stop once socket and kernel buffers are full
  // (a few MB on loopback); an unbounded writer would produce thousands of items meanwhile.
  const stalled = await waitForPlateau(() => produced);
  assert.ok(stalled > 0, 'producer started');
  assert.ok(stalled < 250, `producer should be bounded while paused, produced ${stalled}`);
  await sleep(100);
  assert.equal(produced, stalled, 'no progress while paused');
  assert.equal(writer.closed, false);

  // Resuming the reader lets items flow again: the client gets more than was buffered while paused.
  client.socket.resume();
  await waitUntil(() => client.received() > (stalled + 50) * BIG.length, 'items to flow after resume');
  assert.ok(produced > stalled + 50, `producer continued (${produced} > ${stalled})`);
  client.socket.destroy();
  await waitUntil(() => writer.signal.aborted, 'abort after disconnect');
});

test('ndjson: disconnect aborts the signal, rejects writes and returns the source iterator', async (t) => {
  let produced = 0;
  let finallyRan = false;
  const opened = deferred<{ writer: NdjsonWriter; piped: Promise<void> }>();
  const port = await startServer(t, (_req, res) => {
    const writer = openNdjson(res);
    const source = (async function* () {
      try {
        while (produced < RUNAWAY_LIMIT) {
          produced++;
          yield { i: produced, pad: BIG };
        }
      } finally {
        finallyRan = true;
      }
    })();
    opened.resolve({ writer, piped: pump(writer, source) });
  });

  const client = await rawGet(t, port, '/');
  client.socket.pause();
  const { writer, piped } = await opened.promise;
  const stalled = await waitForPlateau(() => produced); // producer is now blocked in write(), waiting for 'drain'
  assert.ok(stalled < 250, `producer should be blocked, produced ${stalled}`);
  assert.equal(writer.signal.aborted, false);
  assert.equal(finallyRan, false);

  client.socket.destroy();
  await waitUntil(() => writer.signal.aborted, 'signal to abort after disconnect', 1000);
  assert.ok(writer.signal.reason instanceof StreamClosedError);
  assert.equal(writer.closed, true);
  await assert.rejects(writer.write({ late: true }), StreamClosedError);

  await Promise.race([piped, sleep(1000).then(() => assert.fail('pump did not settle'))]);
  assert.equal(finallyRan, true, "source generator's finally block ran");
  const after = produced;
  await sleep(50);
  assert.equal(produced, after, 'source is no longer pulled');
});

test('ndjson: heartbeat writes blank lines only when enabled', async (t) => {
  const port = await startServer(t, (req, res) => {
    const heartbeatMs = req.url === '/hb' ? 20 : undefined;
    const writer = openNdjson(res, { heartbeatMs });
    void writer.write({ n: 1 });
    setTimeout(() => writer.end(), 120);
  });

  const plain = await httpGet(t, port, '/plain');
  await plain.done;
  assert.equal(plain.body(), '{"n":1}\n', 'no heartbeat by default');

  const hb = await httpGet(t, port, '/hb');
  await hb.done;
  assert.match(hb.body(), /^\{"n":1\}\n\n{2,}$/, 'blank heartbeat lines after the value');
  const parsed = hb
    .body()
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as unknown);
  assert.deepEqual(parsed, [{ n: 1 }]);
});

test('sse: exact frame format, comments and heartbeat pings', async (t) => {
  let serverRes: ServerResponse | undefined;
  const opened = deferred<SseWriter>();
  const rejected = deferred<unknown[]>();
  const port = await startServer(t, (_req, res) => {
    serverRes = res;
    const writer = openSse(res, { heartbeatMs: 50 });
    opened.resolve(writer);
    void (async () => {
      await writer.send({ event: 'greet', data: 'hello' });
      await writer.send({ data: { a: 1, s: 'x\ny' }, id: '7' });
      await writer.send({ event: 'multi', data: 'line1\nline2\r\nline3\n', id: 'abc', retry: 1000 });
      await writer.send({ data: '' });
      await writer.comment('note');
      const errors: unknown[] = [];
      for (const bad of [
        writer.send({ event: 'a\nb', data: 1 }),
        writer.send({ id: 'a\rb', data: 1 }),
        writer.send({ id: 'a\0b', data: 1 }),
        writer.send({ retry: -1, data: 1 }),
        writer.send({ retry: 1.5, data: 1 }),
        writer.send({ data: undefined }),
      ]) {
        errors.push(
          await bad.then(
            () => 'resolved',
            (err: unknown) => err,
          ),
        );
      }
      rejected.resolve(errors);
    })();
  });

  const { res, body, done } = await httpGet(t, port, '/');
  const frames =
    'event: greet\ndata: hello\n\n' +
    'id: 7\ndata: {"a":1,"s":"x\\ny"}\n\n' +
    'event: multi\nid: abc\nretry: 1000\ndata: line1\ndata: line2\ndata: line3\ndata: \n\n' +
    'data: \n\n' +
    ': note\n\n';
  // Wait for two heartbeats after the frames (the stream is idle from here on).
  await waitUntil(
    () => body().startsWith(frames) && body().slice(frames.length).split(': ping\n\n').length > 2,
    'pings',
  );
  (await opened.promise).end();
  await done;

  assert.equal(res.headers['content-type'], 'text/event-stream; charset=utf-8');
  assert.equal(res.headers['cache-control'], 'no-cache');
  assert.equal(res.headers['x-accel-buffering'], 'no');
  assert.equal(serverRes?.getHeader('connection'), undefined, 'writer must not set Connection');
  assert.ok(body().startsWith(frames), JSON.stringify(body()));
  assert.match(body().slice(frames.length), /^(: ping\n\n){2,}$/);
  for (const err of await rejected.promise) assert.ok(err instanceof TypeError, String(err));
});

interface TimerProbe {
  /** Timers created while opening the writer (the heartbeat). */
  created: NodeJS.Timeout[];
  /** Whether clearTimeout() was later called on that timer. */
  cleared(): boolean;
  /** res.write() calls made after the writer closed. */
  writesAfterClose(): number;
}

/**
 * Opens a writer while spying on the global timer functions (calls go through to the real ones)
 * and on res.write, so tests can check the heartbeat timer's lifecycle.
 */
function probeTimers<W extends { closed: boolean }>(
  t: TestContext,
  res: ServerResponse,
  open: () => W,
): { writer: W; probe: TimerProbe } {
  const setSpy = t.mock.method(globalThis, 'setTimeout');
  let writer: W;
  try {
    writer = open();
  } finally {
    setSpy.mock.restore();
  }
  const created = setSpy.mock.calls.map((call) => call.result).filter((r) => r !== undefined);
  const clearSpy = t.mock.method(globalThis, 'clearTimeout');
  let lateWrites = 0;
  const write = res.write.bind(res) as (...args: unknown[]) => boolean;
  res.write = ((...args: unknown[]): boolean => {
    if (writer.closed) lateWrites++;
    return write(...args);
  }) as typeof res.write;
  return {
    writer,
    probe: {
      created,
      cleared: () => clearSpy.mock.calls.some((call) => created.includes(call.arguments[0] as NodeJS.Timeout)),
      writesAfterClose: () => lateWrites,
    },
  };
}

test('sse: after end() the heartbeat timer is cleared and nothing more is written', async (t) => {
  const opened = deferred<{ writer: SseWriter; probe: TimerProbe }>();
  const port = await startServer(t, (_req, res) => {
    const { writer, probe } = probeTimers(t, res, () => openSse(res, { heartbeatMs: 30 }));
    opened.resolve({ writer, probe });
    void writer.send({ data: 'only' });
  });

  // Keep-alive: the socket outlives the response, so a stray heartbeat would show up on it.
  const client = await rawGet(t, port, '/', true);
  const { writer, probe } = await opened.promise;
  assert.equal(probe.created.length, 1, 'one heartbeat timer');
  assert.equal(probe.created[0]?.hasRef(), false, 'heartbeat timer is unref()ed');

  await waitUntil(() => parseResponse(client.bytes()).body.includes(': ping\n\n'), 'a heartbeat while idle');
  writer.end();
  assert.equal(probe.cleared(), true, 'end() clears the heartbeat timer');
  await waitUntil(() => parseResponse(client.bytes()).complete, 'terminating chunk');
  const { body } = parseResponse(client.bytes());
  assert.match(body, /^data: only\n\n(: ping\n\n)+$/);
  assert.equal(writer.closed, true);
  assert.ok(writer.signal.aborted);
  assert.ok(writer.signal.reason instanceof StreamClosedError);
  await assert.rejects(writer.comment('late'), StreamClosedError);

  const length = client.received();
  await sleep(150); // five heartbeat periods
  assert.equal(probe.writesAfterClose(), 0, 'no res.write() after end()');
  assert.equal(client.received(), length, 'no bytes after the response ended');
  assert.equal(client.socket.destroyed, false, 'keep-alive connection still usable');

  // Nothing is pending on the server side, so ending the connection closes it promptly.
  client.socket.end();
  await Promise.race([client.closed, sleep(1000).then(() => assert.fail('connection did not close'))]);
});

test('ndjson: client disconnect clears the heartbeat timer', async (t) => {
  const opened = deferred<{ writer: NdjsonWriter; probe: TimerProbe }>();
  const port = await startServer(t, (_req, res) => {
    const { writer, probe } = probeTimers(t, res, () => openNdjson(res, { heartbeatMs: 20 }));
    opened.resolve({ writer, probe });
  });

  const client = await rawGet(t, port, '/');
  const { writer, probe } = await opened.promise;
  assert.equal(probe.created.length, 1);
  await waitUntil(() => parseResponse(client.bytes()).body.includes('\n'), 'a heartbeat line');
  client.socket.destroy();
  await waitUntil(() => writer.signal.aborted, 'abort after disconnect', 1000);
  assert.equal(probe.cleared(), true, 'disconnect clears the heartbeat timer');
  await sleep(80);
  assert.equal(probe.writesAfterClose(), 0);
});

test('writers report closed at once if the client is already gone', async (t) => {
  const state = deferred<{ aborted: boolean; closed: boolean; write: unknown }>();
  const port = await startServer(t, (req, res) => {
    req.socket.destroy();
    // Open only after 'close' was emitted, so the writer cannot rely on seeing the event.
    req.socket.once('close', () => {
      const writer = openNdjson(res, { heartbeatMs: 10 });
      const aborted = writer.signal.aborted;
      const closed = writer.closed;
      void writer.write(1).then(
        () => state.resolve({ aborted, closed, write: 'resolved' }),
        (err: unknown) => state.resolve({ aborted, closed, write: err }),
      );
    });
  });
  const client = await rawGet(t, port, '/');
  await client.closed;
  const s = await Promise.race([state.promise, sleep(1000).then(() => assert.fail('write did not settle'))]);
  assert.equal(s.aborted, true);
  assert.equal(s.closed, true);
  assert.ok(s.write instanceof StreamClosedError);
});
