import assert from 'node:assert/strict';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it, type TestContext } from 'node:test';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

// Issue 17 (item 3): one signed-in user must not be able to freeze the process. While each hostile
// request below runs, `GET /version` on the gateway is sampled over and over; the slowest answer
// must stay under LIMIT_MS. Everything runs in this one process, so a request that keeps the event
// loop busy delays the samples (and this test's own code) by exactly that long.

const LIMIT_MS = 200;
/** How long a hostile request that is still running is watched before it is abandoned. */
const WATCH_MS = 4_000;
/** Pause between two samples. */
const PAUSE_MS = 5;
const MiB = 1024 * 1024;
const LOG_BYTES = 16 * MiB;
const DOCUMENTS = 5_000;
const SCHEDULER_KEY = 'event-loop-scheduler-key';
const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'event-loop-user' } }) };
/** Linear, but costly per byte: matched on the event loop, 16 MB of these lines took seconds. */
const HEAVY = '[\\p{L}\\p{N}]{200}Z';

interface Sent {
  readonly done: Promise<{ status: number; text: string }>;
  abort(): void;
}

/** A request on the internal port (identity trusted) whose answer is read to the end or abandoned. */
function send(
  port: number,
  options: { method?: string; host: string; path: string; headers?: Record<string, string>; body?: string | Buffer },
): Sent {
  let req: http.ClientRequest | undefined;
  const done = new Promise<{ status: number; text: string }>((resolve, reject) => {
    const headers: Record<string, string> = { host: options.host, ...identity, ...options.headers };
    if (options.body !== undefined) headers['content-length'] = String(Buffer.byteLength(options.body));
    req = http.request(
      { host: '127.0.0.1', port, method: options.method ?? 'GET', path: options.path, headers, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (text.length < 4096) text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
  done.catch(() => undefined);
  return { done, abort: () => req?.destroy() };
}

describe('event loop: hostile requests leave /version answering promptly', { timeout: 120_000 }, () => {
  let t: TestPlatform;
  let port: number;
  let loggerId: string;
  let loggerKey: Record<string, string>;
  let databaseId: string;

  const ok = async (sent: Sent, status: number, what: string): Promise<string> => {
    const answer = await sent.done;
    assert.equal(answer.status, status, `${what}: ${answer.text.slice(0, 300)}`);
    return answer.text;
  };

  /**
   * Starts the hostile requests, samples `GET /version` until they have all answered (at least
   * five samples) or WATCH_MS has passed, abandons what is still running, and returns the answers
   * that came. A sample's latency counts from when it was due (the end of the short pause after the
   * previous one), so a busy event loop that delays the pause's timer is measured too: that is
   * when a client elsewhere would have been kept waiting.
   */
  const watch = async (
    context: TestContext,
    what: string,
    start: () => Sent[],
  ): Promise<{ status: number; text: string }[]> => {
    // A freeze (seconds of work on the event loop) shows in every attempt; a scheduling hiccup of
    // a loaded 2-core machine does not. So a scenario gets up to three attempts, and the best one
    // must stay under the limit.
    let attempt = await watchOnce(what, start);
    for (let retry = 1; retry < 3 && attempt.worst >= LIMIT_MS; retry++) {
      context.diagnostic(`${attempt.summary}; trying again`);
      attempt = await watchOnce(what, start);
    }
    context.diagnostic(attempt.summary);
    assert.ok(attempt.worst < LIMIT_MS, attempt.summary);
    return attempt.results;
  };

  const watchOnce = async (
    what: string,
    start: () => Sent[],
  ): Promise<{ worst: number; summary: string; results: { status: number; text: string }[] }> => {
    const sent = start();
    let settled = false;
    const outcomes = Promise.allSettled(sent.map((s) => s.done)).then((results) => {
      settled = true;
      return results;
    });
    const samples: number[] = [];
    const began = performance.now();
    let due = began;
    while (samples.length < 5 || (!settled && performance.now() - began < WATCH_MS)) {
      const version = await t.call({ host: 'gateway.localhost', path: '/version' });
      samples.push(performance.now() - due);
      assert.equal(version.status, 200);
      due = performance.now() + PAUSE_MS;
      await sleep(PAUSE_MS);
    }
    for (const s of sent) s.abort();
    const results = await outcomes;
    const worst = Math.max(...samples);
    const summary = `${what}: slowest /version ${worst.toFixed(0)} ms (${samples.length} samples, median ${samples.sort((a, b) => a - b)[samples.length >> 1]!.toFixed(1)} ms)`;
    return { worst, summary, results: results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : [])) };
  };

  before(async () => {
    t = await startTestPlatform({ schedulerApiKeys: [SCHEDULER_KEY] });
    port = t.platform.internalPort;

    // Logs: 16 MB of ~100-byte lines in 1 MiB ingests, and a logger key for event ingest.
    loggerId = JSON.parse(
      await ok(
        send(port, { method: 'POST', host: 'logs.localhost', path: '/v1/loggers', body: '{"name":"event-loop"}' }),
        201,
        'create logger',
      ),
    ).id;
    const key = JSON.parse(
      await ok(
        send(port, {
          method: 'POST',
          host: 'logs.localhost',
          path: `/v1/loggers/${loggerId}/apiKeys`,
          body: '{"name":"k"}',
        }),
        201,
        'create key',
      ),
    ) as { key: string; secret: string };
    loggerKey = { 'api-key': key.key, 'api-secret': key.secret };
    let n = 0;
    for (let sent = 0; sent < LOG_BYTES;) {
      let body = '';
      while (body.length < MiB) {
        body += `2025-06-21T12:00:${String(n % 60).padStart(2, '0')}.000Z host-${n % 7} app[${n}]: GET /api/v1/users/${n * 7919} status=200 took ${n % 97}ms\n`;
        n++;
      }
      await ok(
        send(port, { method: 'POST', host: 'logs.localhost', path: `/v1/loggers/${loggerId}/ingest`, body }),
        200,
        'ingest',
      );
      sent += body.length;
    }

    // docdb: 5,000 small documents in one streamed insert, and one large document elsewhere.
    databaseId = JSON.parse(
      await ok(
        send(port, { method: 'POST', host: 'docdb.localhost', path: '/v1/databases', body: '{"name":"event-loop"}' }),
        201,
        'create database',
      ),
    ).id;
    const documents = Array.from({ length: DOCUMENTS }, (_, i) =>
      JSON.stringify({
        id: `doc-${i}`,
        n: i,
        name: `user ${i}`,
        tags: ['a', `t${i % 10}`],
        address: { city: `city ${i % 50}` },
      }),
    ).join('\n');
    await ok(
      send(port, {
        method: 'POST',
        host: 'docdb.localhost',
        path: `/v1/databases/${databaseId}/collections/people:insert`,
        body: documents,
      }),
      201,
      'insert documents',
    );
    const large = JSON.stringify({ id: 'large', values: new Array<number>(1_500_000).fill(0) });
    await ok(
      send(port, {
        method: 'POST',
        host: 'docdb.localhost',
        path: `/v1/databases/${databaseId}/collections/large:insert`,
        body: large,
      }),
      201,
      'insert the large document',
    );
  });

  after(async () => {
    await t?.close();
  });

  const filter = (patterns: string[]) =>
    send(port, {
      host: 'logs.localhost',
      path: `/v1/loggers/${loggerId}/filter?${patterns.map((p) => `regex=${encodeURIComponent(p)}`).join('&')}`,
    });
  const find = (collection: string, body: unknown) =>
    send(port, {
      method: 'POST',
      host: 'docdb.localhost',
      path: `/v1/databases/${databaseId}/collections/${collection}:find`,
      body: JSON.stringify(body),
    });

  it('logs: a heavy pattern over 16 MB of lines', async (context) => {
    await watch(context, 'one heavy filter', () => [filter([HEAVY])]);
  });

  it('logs: three heavy filters at once', async (context) => {
    await watch(context, 'three heavy filters', () => [
      filter([HEAVY]),
      filter([`${HEAVY}|x{3}Q`]),
      filter(['(?i)[a-z]{150}Q']),
    ]);
  });

  it('logs: 32 heavy patterns in one request are refused', async (context) => {
    const [answer] = await watch(context, '32 heavy patterns', () => [
      filter(Array.from({ length: 32 }, (_, i) => `${HEAVY}|${i}{9}`)),
    ]);
    assert.equal(answer?.status, 400, answer?.text);
    assert.equal(JSON.parse(answer.text).error.code, 'validation_error');
  });

  it('logs: a 6 MB events ingest', async (context) => {
    const events = Array.from(
      { length: 60_000 },
      (_, i) => `{"project_id":"p1","message":"event ${i} ${'x'.repeat(40)}","n":${i},"tags":["a","b"]}`,
    ).join('\n');
    const [answer] = await watch(context, 'events ingest', () => [
      send(port, {
        method: 'POST',
        host: 'logs.localhost',
        path: '/v1/ingest/events',
        headers: loggerKey,
        body: events,
      }),
    ]);
    assert.equal(answer?.status, 200, answer?.text);
    assert.deepEqual(JSON.parse(answer.text), { events: 60_000, bytes: Buffer.byteLength(events) });
  });

  it('docdb: find with a 150,000-element $in is refused', async (context) => {
    const filterBody = { filter: { n: { $in: Array.from({ length: 150_000 }, (_, i) => -i - 1) } }, limit: -1 };
    const [answer] = await watch(context, 'huge $in', () => [find('people', filterBody)]);
    assert.equal(answer?.status, 400, answer?.text);
    assert.equal(JSON.parse(answer.text).error.code, 'invalid_filter');
  });

  it('docdb: two heavy filters within the caps, over 5,000 documents', async (context) => {
    // 3,000 conditions (9,000 values of the 20,000 allowed) tested on every document.
    const conditions = Array.from({ length: 3_000 }, (_, i) => ({ name: { $contains: `nobody ${i}` } }));
    const [answer] = await watch(context, 'heavy filter scan', () => [
      find('people', { filter: { $or: conditions }, limit: -1 }),
      find('people', { filter: { $and: [{ $or: conditions }] }, limit: -1 }),
    ]);
    assert.equal(answer?.status, 200, answer?.text);
  });

  it('docdb: a filter over a large document', async (context) => {
    const conditions = Array.from({ length: 100 }, (_, i) => ({ $gt: i + 1 }));
    const [answer] = await watch(context, 'filter on a large document', () => [
      find('large', { filter: { values: { $or: conditions } }, limit: -1 }),
    ]);
    assert.equal(answer?.status, 200, answer?.text);
    assert.equal(answer.text, '');
  });

  describe('scheduler', () => {
    // Prepared here rather than above: on SQLite this 10 MB write starts a WAL checkpoint (a store
    // matter, on the event loop), which must not land in the middle of the cases above.
    before(async () => {
      // 40 tasks whose payloads hold 256 KB of one letter (10 MB in all).
      await ok(
        send(port, {
          method: 'POST',
          host: 'scheduler.localhost',
          path: '/schedulers',
          headers: { 'x-api-key': SCHEDULER_KEY },
          body: '{"id":"s","display_name":"S"}',
        }),
        201,
        'create scheduler',
      );
      const payload = JSON.stringify({ payload: { text: 'a'.repeat(256 * 1024) }, delay: '1h' });
      for (let i = 0; i < 40; i++)
        await ok(
          send(port, {
            method: 'POST',
            host: 'scheduler.localhost',
            path: '/schedulers/s/tasks',
            headers: { 'x-api-key': SCHEDULER_KEY },
            body: payload,
          }),
          202,
          'enqueue',
        );
    });

    it('scheduler: an 8 KiB search over large payloads is refused', async (context) => {
      const search = encodeURIComponent(`${'a'.repeat(8 * 1024 - 1)}b`);
      const [answer] = await watch(context, 'long payload search', () => [
        send(port, {
          host: 'scheduler.localhost',
          path: `/schedulers/s/tasks?search=${search}`,
          headers: { 'x-api-key': SCHEDULER_KEY },
        }),
      ]);
      assert.equal(answer?.status, 400, answer?.text);
      assert.equal(JSON.parse(answer.text).error.code, 'validation_error');
    });

    it('scheduler: a task search over large payloads', async (context) => {
      const search = encodeURIComponent(`${'a'.repeat(255)}b`);
      const [answer] = await watch(context, 'payload search', () => [
        send(port, {
          host: 'scheduler.localhost',
          path: `/schedulers/s/tasks?search=${search}`,
          headers: { 'x-api-key': SCHEDULER_KEY },
        }),
        send(port, {
          host: 'scheduler.localhost',
          path: `/schedulers/s/tasks?search=${search}&label=a:b`,
          headers: { 'x-api-key': SCHEDULER_KEY },
        }),
      ]);
      assert.equal(answer?.status, 200, answer?.text);
      assert.equal(JSON.parse(answer.text).scheduled_meta.total, 0);
    });
  });
});
