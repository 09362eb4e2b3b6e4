import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { request } from '../../helpers/http.ts';
import { SchedulerEvents } from '../../../src/services/scheduler/events.ts';
import { SchedulerRepository } from '../../../src/services/scheduler/repository.ts';
import { KEY, startScheduler, type SchedulerHarness } from './helpers.ts';
import { deferred, within } from '../../helpers/waiting.ts';

interface Snapshot {
  scheduler_id: string;
  generated_at: string;
  scheduled: { id: string }[];
  inflight: { id: string }[];
  scheduled_meta: { total: number; per_page: number };
  inflight_meta: { total: number };
  health: { status: string; scheduled: number; inflight: number; scheduler_id: string };
}

/** An open SSE connection that collects `snapshot` frames. */
function openStream(port: number, path: string) {
  const frames: { raw: string; data: Snapshot }[] = [];
  let waiters: (() => void)[] = [];
  let ended = false;
  let headers: http.IncomingHttpHeaders = {};
  const req = http.get({ host: '127.0.0.1', port, path, agent: false });
  const ready = new Promise<number>((resolve, reject) => {
    req.on('error', reject);
    req.on('response', (res) => {
      headers = res.headers;
      resolve(res.statusCode ?? 0);
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const raw = buffer.slice(0, end + 2);
          buffer = buffer.slice(end + 2);
          if (raw.startsWith('event: snapshot\n')) {
            const data = raw.split('\n')[1]!.replace(/^data: /, '');
            frames.push({ raw, data: JSON.parse(data) as Snapshot });
          }
          for (const w of waiters) w();
          waiters = [];
        }
      });
      res.on('end', () => {
        ended = true;
        for (const w of waiters) w();
      });
    });
  });
  return {
    ready,
    frames,
    headers: () => headers,
    ended: () => ended,
    async next(count: number, timeoutMs = 3000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (frames.length < count && !ended) {
        if (Date.now() > deadline) throw new Error(`expected ${count} snapshots, got ${frames.length}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 100);
        });
      }
    },
    close: () => req.destroy(),
  };
}

/**
 * Watches reserves on one scheduler from the server side: `waiting` resolves once a reserve has
 * found nothing due and is about to wait (it looks up the next due time only then), `ended` once
 * a reserve stops listening for changes (its handler is done), and `claims` counts its claims.
 */
function watchReserve(schedulerId: string) {
  const { nextDue, claim } = SchedulerRepository.prototype;
  const { listen } = SchedulerEvents.prototype;
  const waiting = deferred();
  const ended = deferred();
  let claims = 0;
  SchedulerRepository.prototype.nextDue = async function (
    this: SchedulerRepository,
    ...args: Parameters<typeof nextDue>
  ) {
    const next = await nextDue.apply(this, args);
    if (args[0] === schedulerId) waiting.resolve();
    return next;
  };
  SchedulerRepository.prototype.claim = function (this: SchedulerRepository, ...args: Parameters<typeof claim>) {
    if (args[0] === schedulerId) claims++;
    return claim.apply(this, args);
  };
  SchedulerEvents.prototype.listen = function (this: SchedulerEvents, ...args: Parameters<typeof listen>) {
    const unlisten = listen.apply(this, args);
    if (args[0] !== schedulerId) return unlisten;
    return () => {
      unlisten();
      ended.resolve();
    };
  };
  return {
    waiting: waiting.promise,
    ended: ended.promise,
    claims: () => claims,
    restore() {
      Object.assign(SchedulerRepository.prototype, { nextDue, claim });
      SchedulerEvents.prototype.listen = listen;
    },
  };
}

/** Resolves when the server's response to the next request for `path` closes: with whether it had finished. */
function serverSideClose(server: http.Server, path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (req.url !== path) return;
      server.off('request', onRequest);
      res.once('close', () => resolve(res.writableFinished));
    };
    server.on('request', onRequest);
  });
}

describe('scheduler: snapshot stream', () => {
  let h: SchedulerHarness;
  let port: number;
  before(async () => {
    h = await startScheduler();
    await h.service.app.listen({ port: 0, host: '127.0.0.1' });
    port = (h.service.app.server.address() as { port: number }).port;
  });
  after(async () => {
    await h.close();
  });

  it('sends a snapshot on connect and after changes, coalesced to at most 4 per second', async () => {
    await h.createScheduler('live');
    await h.enqueue('live', { id: 'first', labels: ['a:b'] });
    const stream = openStream(port, '/schedulers/live/tasks/stream?scheduled_per_page=5');
    assert.equal(await stream.ready, 200);
    assert.match(String(stream.headers()['content-type']), /^text\/event-stream/);
    assert.equal(stream.headers()['cache-control'], 'no-cache');
    await stream.next(1);
    const first = stream.frames[0]!;
    assert.match(first.raw, /^event: snapshot\ndata: \{.*\}\n\n$/);
    assert.ok(!first.raw.includes('\nid:'));
    assert.deepEqual(Object.keys(first.data), [
      'scheduler_id',
      'generated_at',
      'scheduled',
      'inflight',
      'scheduled_meta',
      'inflight_meta',
      'health',
    ]);
    assert.equal(first.data.scheduler_id, 'live');
    assert.deepEqual(
      first.data.scheduled.map((t) => t.id),
      ['first'],
    );
    assert.equal(first.data.scheduled_meta.per_page, 5);
    assert.deepEqual(first.data.health, { status: 'ok', ready: true, scheduled: 1, inflight: 0, scheduler_id: 'live' });

    // A burst of changes: few snapshots, the last one reflects everything.
    const started = Date.now();
    for (let i = 0; i < 20; i++) await h.enqueue('live', { id: `burst-${i}` });
    await h.call('POST', '/schedulers/live/tasks/reserve', { worktime: '30s' });
    await new Promise((r) => setTimeout(r, 700));
    const sent = stream.frames.length - 1;
    assert.ok(sent >= 1 && sent <= Math.ceil((Date.now() - started) / 250) + 1, `snapshots after the burst: ${sent}`);
    const last = stream.frames.at(-1)!.data;
    assert.deepEqual([last.health.scheduled, last.health.inflight], [20, 1]);
    assert.equal(last.scheduled_meta.total, 20);
    assert.equal(last.scheduled.length, 5);
    stream.close();
  });

  it('shows a lease expiry without any other change', async () => {
    await h.createScheduler('expiring');
    await h.enqueue('expiring', { id: 'e' });
    await h.call('POST', '/schedulers/expiring/tasks/reserve', { worktime: '300ms' });
    const stream = openStream(port, '/schedulers/expiring/tasks/stream');
    await stream.next(1);
    assert.equal(stream.frames[0]!.data.health.inflight, 1);
    const deadline = Date.now() + 3000;
    while (!stream.frames.some((f) => f.data.health.inflight === 0) && Date.now() < deadline)
      await stream.next(stream.frames.length + 1).catch(() => {});
    const expired = stream.frames.find((f) => f.data.health.inflight === 0);
    assert.ok(expired, 'a snapshot after the lease ran out');
    assert.equal(expired.data.health.scheduled, 1);
    assert.equal(expired.data.scheduled[0]!.id, 'e');
    stream.close();
  });

  it('ends when the scheduler is deleted; validates the query and the scheduler first', async () => {
    await h.createScheduler('short');
    const stream = openStream(port, '/schedulers/short/tasks/stream');
    await stream.next(1);
    await h.call('DELETE', '/schedulers/short');
    const deadline = Date.now() + 3000;
    while (!stream.ended() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.ok(stream.ended());
    const bad = await request(port, { path: '/schedulers/live/tasks/stream?inflight_per_page=0' });
    assert.equal(bad.status, 400);
    assert.equal(bad.json<{ error: { code: string } }>().error.code, 'validation_error');
    const missing = await request(port, { path: '/schedulers/nope/tasks/stream' });
    assert.equal(missing.status, 404);
    assert.equal(missing.json<{ error: { code: string } }>().error.code, 'not_found');
  });

  it('a reserve whose client disconnects while waiting leases nothing', async () => {
    await h.createScheduler('hangup');
    const path = '/schedulers/hangup/tasks/reserve';
    const watch = watchReserve('hangup');
    try {
      const cut = serverSideClose(h.service.app.server, path);
      const req = http.request({
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent: false,
        headers: { host: 'scheduler.localhost', 'x-api-key': KEY, 'content-type': 'application/json' },
      });
      req.on('error', () => {});
      // 30 s: the longest a reserve waits; only the disconnect can end it within this test.
      req.end('{"worktime":"30s"}');
      await within(watch.waiting, 'the reserve to find nothing due and wait');
      req.destroy();
      assert.equal(await within(cut, 'the server to see the disconnect'), false, 'the answer was cut, not finished');
      const claimsAtClose = watch.claims();
      // The reserve would take this task if it were still waiting for its client.
      await h.enqueue('hangup', { id: 'kept' });
      await within(watch.ended, 'the reserve to end');
      const health = (await h.call('GET', '/schedulers/hangup/health')).json();
      assert.deepEqual([health.scheduled, health.inflight], [1, 0], 'nothing is leased to a client that has gone');
      assert.equal(watch.claims(), claimsAtClose, 'no claim after the server has seen the client go');
    } finally {
      watch.restore();
    }
  });
});
