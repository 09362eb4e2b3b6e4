import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { createTestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/http.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';

// SIGTERM on a `stratus serve` process (root README.md, Rolling restarts): readiness 503 at once,
// no new connections, in-flight requests finish, streams and waiting reserves end resumably, exit
// 0 within SHUTDOWN_TIMEOUT; and the timeout cuts what would not finish. Runs on SQLite and, with
// DATABASE_URL, on PostgreSQL.

const SCHEDULER = 'scheduler.localhost';
const LOGS = 'logs.localhost';
const key = { 'x-api-key': 'k', 'content-type': 'application/json' };
const owner = {
  'x-gateway-authentication': JSON.stringify({ user: { id: 'shutdown-owner' } }),
  'content-type': 'application/json',
};

interface Streamed {
  /** Resolves once the response head arrived. */
  head: Promise<http.IncomingMessage>;
  /** Resolves when the body ended cleanly (`end`), rejects if it was cut. */
  ended: Promise<{ text: string; trailers: NodeJS.Dict<string> }>;
  text(): string;
  destroy(): void;
}

/** A GET whose body is read as it arrives (SSE, follow streams). */
function stream(port: number, host: string, path: string, headers: Record<string, string>): Streamed {
  let text = '';
  let req: http.ClientRequest | undefined;
  let resolveHead!: (res: http.IncomingMessage) => void;
  const head = new Promise<http.IncomingMessage>((resolve) => (resolveHead = resolve));
  const ended = new Promise<{ text: string; trailers: NodeJS.Dict<string> }>((resolve, reject) => {
    req = http.request({ host: '127.0.0.1', port, path, headers: { host, ...headers }, agent: false }, (res) => {
      resolveHead(res);
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ text, trailers: res.trailers }));
      res.on('aborted', () => reject(new Error('stream cut')));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
  ended.catch(() => {});
  return { head, ended, text: () => text, destroy: () => req?.destroy() };
}

/** A POST whose body is sent in parts, by the test, over time. */
function slowUpload(port: number, host: string, path: string, headers: Record<string, string>, length: number) {
  let req!: http.ClientRequest;
  const answered = new Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }>(
    (resolve, reject) => {
      req = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path,
          agent: false,
          headers: { host, ...headers, 'content-length': String(length) },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
    },
  );
  req.flushHeaders();
  answered.catch(() => {});
  return { req, answered };
}

/** Resolves with the error code of a fresh connection attempt (undefined when it connected). */
function connectOutcome(port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code));
  });
}

function exited(server: ServedProcess): Promise<number | null> {
  const { child } = server;
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

const within = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([
    promise,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms).unref()),
  ]);

describe('graceful shutdown', () => {
  it('SIGTERM: readiness 503, no new connections, in-flight work finishes, streams end resumably, exit 0', async () => {
    const database = await createTestDatabase();
    const env = { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl, SCHEDULER_API_KEYS: 'k' };
    let server = await serve(['--services', 'scheduler,logs', '--shutdown-timeout', '10'], env);
    try {
      const internal = server.internalPort;
      const ready = await request(server.publicPort, { path: '/readyz', host: '127.0.0.1:8080' });
      assert.equal(ready.status, 200, ready.text);
      assert.deepEqual(ready.json(), { status: 'ready' });

      // A scheduler with one task due in 4 s, a snapshot stream on it and a reserve waiting for it.
      const call = (method: string, path: string, body: unknown) =>
        request(internal, { method, path, host: SCHEDULER, headers: key, body: JSON.stringify(body) });
      assert.equal((await call('POST', '/schedulers', { id: 'rolling', display_name: 'R' })).status, 201);
      const enqueued = await call('POST', '/schedulers/rolling/tasks', { id: 'later', delay: '4s', payload: 1 });
      assert.equal(enqueued.status, 202, enqueued.text);
      const sse = stream(internal, SCHEDULER, '/schedulers/rolling/tasks/stream', {});
      const sseHead = await sse.head;
      assert.equal(sseHead.statusCode, 200);
      const reserve = call('POST', '/schedulers/rolling/tasks/reserve', { worktime: '20s' });

      // A logger, a follow stream that has seen the first line, and a slow ingest under way.
      const created = await request(internal, {
        method: 'POST',
        path: '/v1/loggers',
        host: LOGS,
        headers: owner,
        body: '{"name":"app"}',
      });
      assert.equal(created.status, 201, created.text);
      const logger = created.json<{ id: string }>().id;
      const ingest = (body: string) =>
        request(internal, { method: 'POST', path: `/v1/loggers/${logger}/ingest`, host: LOGS, headers: owner, body });
      assert.equal((await ingest('line-1\n')).status, 200);
      const follow = stream(internal, LOGS, `/v1/loggers/${logger}/filter?follow`, owner);
      for (let i = 0; i < 100 && !follow.text().includes('line-1'); i++) await new Promise((r) => setTimeout(r, 20));
      assert.equal(follow.text(), 'line-1\n');
      const upload = slowUpload(internal, LOGS, `/v1/loggers/${logger}/ingest`, owner, 14);
      upload.req.write('slow-1\n');

      // A readiness check whose request is half sent when the signal arrives (an open connection).
      const probe = net.connect(server.publicPort, '127.0.0.1');
      await new Promise<void>((resolve) => probe.once('connect', () => resolve()));
      probe.write('GET /readyz HTTP/1.1\r\nHost: 10.0.0.1\r\n');
      let probeText = '';
      probe.setEncoding('utf8');
      probe.on('data', (chunk: string) => (probeText += chunk));
      const probeClosed = new Promise<void>((resolve) => probe.once('close', () => resolve()));
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(await Promise.race([reserve.then(() => 'answered'), Promise.resolve('waiting')]), 'waiting');

      const signalled = Date.now();
      const exit = exited(server);
      server.child.kill('SIGTERM');

      // New connections are refused on both ports, promptly.
      let refused: string | undefined;
      for (let i = 0; i < 40 && refused === undefined; i++) {
        refused = await connectOutcome(server.publicPort);
        if (refused === undefined) await new Promise((r) => setTimeout(r, 25));
      }
      assert.equal(refused, 'ECONNREFUSED');
      assert.equal(await connectOutcome(internal), 'ECONNREFUSED');

      // Readiness answers 503 on the open connection, and closes it.
      probe.write('\r\n');
      await within(probeClosed, 2_000, 'readiness connection closed');
      assert.match(probeText, /^HTTP\/1\.1 503 /);
      assert.match(probeText, /\r\nconnection: close\r\n/i);
      assert.match(probeText, /"code":"draining"/);

      // The waiting reserve is released without a task; the streams end cleanly.
      const released = await within(reserve, 2_000, 'reserve released');
      assert.equal(released.status, 204, released.text);
      assert.equal(released.headers.connection, 'close');
      const sseEnd = await within(sse.ended, 2_000, 'SSE stream ended');
      assert.match(sseEnd.text, /^event: snapshot\ndata: /);
      const followEnd = await within(follow.ended, 2_000, 'follow stream ended');
      assert.equal(followEnd.text, 'line-1\n');
      const cursor = followEnd.trailers['x-logs-cursor'];
      assert.match(cursor ?? '', /^[0-9]+$/);
      assert.ok(Date.now() - signalled < 3_000, 'released and ended at once, not at the timeout');

      // The in-flight upload is still served: its last bytes arrive, it is answered 200.
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(server.child.exitCode, null, 'still draining while the upload is in flight');
      upload.req.end('slow-2\n');
      const uploaded = await within(upload.answered, 3_000, 'upload answered');
      assert.equal(uploaded.status, 200, uploaded.text);
      assert.deepEqual(JSON.parse(uploaded.text), { n: 14 });
      assert.equal(uploaded.headers.connection, 'close');

      assert.equal(await within(exit, 10_000, 'exit'), 0, server.output());
      assert.ok(Date.now() - signalled < 10_000);

      // Restarted on the same store: the task was never claimed, and the follower resumes from its
      // cursor with what was stored after it (the upload finished during the drain), nothing twice.
      server = await serve(['--services', 'scheduler,logs'], env);
      const again = await request(server.internalPort, {
        method: 'POST',
        path: '/schedulers/rolling/tasks/reserve',
        host: SCHEDULER,
        headers: key,
        body: '{"worktime":"10s"}',
      });
      assert.equal(again.status, 200, again.text);
      assert.equal(again.json<{ id: string }>().id, 'later');
      const more = await request(server.internalPort, {
        method: 'POST',
        path: `/v1/loggers/${logger}/ingest`,
        host: LOGS,
        headers: owner,
        body: 'line-3\n',
      });
      assert.equal(more.status, 200);
      const resumed = stream(server.internalPort, LOGS, `/v1/loggers/${logger}/filter?after=${cursor}`, owner);
      const resumedEnd = await within(resumed.ended, 5_000, 'resumed stream');
      assert.equal(resumedEnd.text, 'slow-1\nslow-2\nline-3\n');
      assert.match(resumedEnd.trailers['x-logs-cursor'] ?? '', /^[0-9]+$/);
      probe.destroy();
    } finally {
      await server.stop();
      await database.cleanup();
    }
  });

  it('the shutdown timeout cuts a request that does not finish, then exits 0', async () => {
    const database = await createTestDatabase();
    const env = { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl };
    const server = await serve(['--services', 'logs', '--shutdown-timeout', '1'], env);
    try {
      const created = await request(server.internalPort, {
        method: 'POST',
        path: '/v1/loggers',
        host: LOGS,
        headers: owner,
        body: '{"name":"stuck"}',
      });
      assert.equal(created.status, 201, created.text);
      const logger = created.json<{ id: string }>().id;
      const upload = slowUpload(server.internalPort, LOGS, `/v1/loggers/${logger}/ingest`, owner, 1_000);
      upload.req.write('never finished\n');
      await new Promise((r) => setTimeout(r, 200));

      const signalled = Date.now();
      const exit = exited(server);
      server.child.kill('SIGTERM');
      await assert.rejects(
        within(upload.answered, 5_000, 'upload cut'),
        (error: Error) => !/not within/.test(error.message),
      );
      const code = await within(exit, 5_000, 'exit');
      const elapsed = Date.now() - signalled;
      assert.equal(code, 0, server.output());
      assert.ok(elapsed >= 900, `waited the timeout (${elapsed} ms)`);
      assert.ok(elapsed < 4_000, `then cut (${elapsed} ms)`);
      assert.match(server.output(), /shutdown timeout: cut requests still in flight/);
    } finally {
      await server.stop();
      await database.cleanup();
    }
  });

  it('SHUTDOWN_DELAY: readiness 503 at once, but new connections and kept-alive ones are served until the delay ends', async () => {
    const database = await createTestDatabase();
    const env = { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl, SHUTDOWN_DELAY: '1.5' };
    const server = await serve(['--services', 'logs'], env);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = (path: string, host: string, viaAgent = false) =>
      new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
        const req = http.request(
          { host: '127.0.0.1', port: server.publicPort, path, headers: { host }, agent: viaAgent ? agent : false },
          (res) => {
            res.resume();
            res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
          },
        );
        req.on('error', reject);
        req.end();
      });
    try {
      assert.equal((await get('/version', 'gateway.localhost', true)).status, 200);
      const signalled = Date.now();
      const exit = exited(server);
      server.child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 300));
      const ready = await get('/readyz', '127.0.0.1');
      assert.equal(ready.status, 503, 'readiness says draining at once');
      // Still serving as before: a new connection, and the kept-alive one, which stays open.
      assert.equal((await get('/version', 'gateway.localhost')).status, 200);
      const kept = await get('/version', 'gateway.localhost', true);
      assert.deepEqual(kept, { status: 200, connection: 'keep-alive' });
      assert.ok(Date.now() - signalled < 1_400, 'those answers came within the delay');
      const code = await within(exit, 6_000, 'exit');
      assert.equal(code, 0, server.output());
      assert.ok(Date.now() - signalled >= 1_400, 'the process waited out the delay');
    } finally {
      agent.destroy();
      await server.stop();
      await database.cleanup();
    }
  });

  it('rejects a bad --shutdown-timeout', async () => {
    const database = await createTestDatabase();
    try {
      await assert.rejects(
        serve(['--services', 'logs', '--shutdown-timeout', 'soon'], { DATA_DIR: database.dataDir }),
        /--shutdown-timeout: "soon" must be a number ≥ 0/,
      );
    } finally {
      await database.cleanup();
    }
  });
});
