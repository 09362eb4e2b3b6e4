import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { all } from '../../../src/store/sql-work.ts';
import { storeDigest } from '../../helpers/platform.ts';
import pino from 'pino';
import { schedulerService } from '../../../src/services/scheduler/index.ts';
import { VERSION } from '../../../src/core/version.ts';
import { startScheduler, type SchedulerHarness } from './helpers.ts';

// Issue 23, part 3: webhook targets (README: Delivery, Webhook signatures), retries, the dead list.

const SECRET = 'whsec-9f2c4e61b7a84d0c';

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
  verified: boolean;
}

/** The receiver's check, written from the README's description of the signature only. */
function verify(secret: string, header: string | undefined, rawBody: string): boolean {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? '');
  if (!match) return false;
  const expected = createHmac('sha256', secret).update(`${match[1]}.${rawBody}`).digest();
  const given = Buffer.from(match[2]!, 'hex');
  const fresh = Math.abs(Date.now() / 1000 - Number(match[1])) < 300;
  return fresh && timingSafeEqual(expected, given);
}

/** A loopback receiver answering `status()` to every POST. */
async function receiver(status: () => number) {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({
        headers: req.headers,
        body,
        verified: verify(SECRET, req.headers['stratus-signature'] as string, body),
      });
      res.statusCode = status();
      res.end('answer body, discarded');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return { server, url, received, close: () => new Promise<void>((r) => server.close(() => r())) };
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 15_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() - started > ms) throw new Error(`not reached in ${ms} ms: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('scheduler webhook delivery', () => {
  let h: SchedulerHarness;
  let status = 200;
  let hook: Awaited<ReturnType<typeof receiver>>;
  before(async () => {
    h = await startScheduler({ lambdaEgressAllow: '127.0.0.1' });
    hook = await receiver(() => status);
  });
  after(async () => {
    await h.close();
    await hook.close();
  });

  const dead = async (id: string, query = '') => {
    const res = await h.call('GET', `/schedulers/${id}/dead${query}`);
    assert.equal(res.statusCode, 200, res.body);
    return res.json<{
      dead: { id: string; labels: string[]; attempts: number; last_error: string | null; failed_at: string }[];
      meta: { total: number; page: number; per_page: number; total_pages: number };
    }>();
  };
  const tasks = async (id: string) => (await h.call('GET', `/schedulers/${id}/tasks`)).json();
  /** Creates scheduler `id` whose target is the test's webhook receiver; asserts the 201. */
  const hooked = async (id: string, display_name: string, retry?: Record<string, unknown>) => {
    const res = await h.call('POST', '/schedulers', {
      id,
      display_name,
      target: { url: hook.url, secret: SECRET },
      ...(retry === undefined ? {} : { retry }),
    });
    assert.equal(res.statusCode, 201, res.body);
    return res;
  };

  it('POSTs the payload signed as documented; a 2xx acknowledges it', async () => {
    status = 200;
    const res = await hooked('hooked', 'Hooked');
    const { scheduler } = res.json();
    assert.deepEqual(scheduler.target, { url: hook.url, secret_set: true });
    assert.deepEqual(scheduler.retry, { max_attempts: 5, base: '5s', factor: 2, cap: '15m' });
    const before = hook.received.length;
    await h.enqueue('hooked', { id: 'w1', payload: { order: 17, note: 'é' }, labels: ['kind:mail'] });
    const [got] = await until(
      async () => hook.received.slice(before),
      (r) => r.length > 0,
    );
    assert.ok(got);
    assert.equal(got.verified, true, JSON.stringify(got.headers));
    assert.deepEqual(JSON.parse(got.body), { order: 17, note: 'é' });
    assert.equal(got.headers['content-type'], 'application/json');
    assert.equal(got.headers['stratus-task-id'], 'w1');
    assert.equal(got.headers['stratus-scheduler-id'], 'hooked');
    assert.equal(got.headers['stratus-attempt'], '1');
    // A signature made with another secret does not verify.
    assert.equal(verify('another-secret-0123456', got.headers['stratus-signature'] as string, got.body), false);
    const list = await until(
      () => tasks('hooked'),
      (l) => l.scheduled_meta.total === 0 && l.inflight_meta.total === 0,
    );
    assert.deepEqual(list.scheduled, []);
    assert.equal((await dead('hooked')).meta.total, 0);
  });

  it('retries a non-2xx with backoff, shows attempt and last_error, then dead-letters it; retry by hand delivers', async () => {
    status = 503;
    // A 400 ms wait after the first attempt: long enough for the list below to see it under load.
    await hooked('flaky', 'Flaky', { max_attempts: 3, base: '400ms', factor: 2, cap: '1s' });
    const before = hook.received.length;
    await h.enqueue('flaky', { id: 'f1', payload: 1, labels: ['a:b'] });
    // Between attempts the task waits, with its attempt count and error in the list.
    const waiting = await until(
      () => tasks('flaky'),
      (l) => l.scheduled.some((t: { attempt?: number }) => t.attempt === 1),
    );
    assert.deepEqual(
      { ...waiting.scheduled[0], future: undefined },
      { id: 'f1', future: undefined, labels: ['a:b'], attempt: 1, last_error: 'webhook answered 503' },
    );
    const list = await until(
      () => dead('flaky'),
      (d) => d.meta.total === 1,
    );
    assert.equal(hook.received.length - before, 3);
    assert.deepEqual(
      hook.received.slice(before).map((r) => r.headers['stratus-attempt']),
      ['1', '2', '3'],
    );
    const [entry] = list.dead;
    assert.equal(entry?.id, 'f1');
    assert.equal(entry?.attempts, 3);
    assert.equal(entry?.last_error, 'webhook answered 503');
    assert.deepEqual(entry?.labels, ['a:b']);
    assert.match(entry?.failed_at ?? '', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    // Dead tasks are not scheduled nor in flight.
    const health = (await h.call('GET', '/schedulers/flaky/health')).json();
    assert.equal(health.scheduled + health.inflight, 0);

    // A task of that id in the scheduler: 409, nothing moves.
    await h.enqueue('flaky', { id: 'f1', delay: '1h' });
    const conflict = await h.call('POST', '/schedulers/flaky/dead/f1/retry');
    assert.equal(conflict.statusCode, 409, conflict.body);
    assert.equal((await dead('flaky')).meta.total, 1);
    assert.equal((await h.call('DELETE', '/schedulers/flaky/tasks/f1')).statusCode, 204);

    status = 200;
    const retried = await h.call('POST', '/schedulers/flaky/dead/f1/retry');
    assert.equal(retried.statusCode, 200, retried.body);
    assert.equal(retried.json().id, 'f1');
    assert.equal((await dead('flaky')).meta.total, 0);
    const delivered = await until(
      async () => hook.received.slice(before + 3),
      (r) => r.length > 0,
    );
    assert.equal(delivered[0]?.headers['stratus-attempt'], '1', 'a retried dead task starts again at attempt 1');
    await until(
      () => tasks('flaky'),
      (l) => l.scheduled_meta.total === 0 && l.inflight_meta.total === 0,
    );
    // Not in the dead list any more: 404 task_not_found.
    const gone = await h.call('POST', '/schedulers/flaky/dead/f1/retry');
    assert.equal(gone.statusCode, 404);
    assert.equal(gone.json().error.code, 'task_not_found');
    assert.equal((await h.call('POST', '/schedulers/nope/dead/f1/retry')).json().error.code, 'not_found');
  });

  it('a refused loopback URL (no LAMBDA_EGRESS_ALLOW) ends in the dead list with the egress error', async () => {
    const closed = await startScheduler();
    try {
      const res = await closed.call('POST', '/schedulers', {
        id: 'refused',
        display_name: 'Refused',
        target: { url: hook.url, secret: SECRET },
        retry: { max_attempts: 2, base: '50ms' },
      });
      assert.equal(res.statusCode, 201, res.body);
      const before = hook.received.length;
      await closed.enqueue('refused', { id: 'r1' });
      const list = await until(
        async () => (await closed.call('GET', '/schedulers/refused/dead')).json(),
        (d) => d.meta.total === 1,
      );
      assert.equal(list.dead[0].attempts, 2);
      assert.match(list.dead[0].last_error, /^webhook: .*refused: a loopback address/);
      assert.equal(hook.received.length, before, 'nothing reached the receiver');
    } finally {
      await closed.close();
    }
  });

  it('pages the dead list and discards a dead task', async () => {
    status = 500;
    await h.call('POST', '/schedulers', {
      id: 'graveyard',
      display_name: 'Graveyard',
      target: { url: hook.url, secret: SECRET },
      retry: { max_attempts: 1 },
    });
    for (const id of ['d1', 'd2', 'd3']) await h.enqueue('graveyard', { id });
    await until(
      () => dead('graveyard'),
      (d) => d.meta.total === 3,
    );
    const page2 = await dead('graveyard', '?page=2&per_page=2');
    assert.deepEqual(page2.meta, { total: 3, page: 2, per_page: 2, total_pages: 2 });
    assert.equal(page2.dead.length, 1);
    assert.equal((await dead('graveyard', '?page=3&per_page=2')).dead.length, 0);
    assert.equal((await h.call('GET', '/schedulers/graveyard/dead?per_page=501')).statusCode, 400);
    assert.equal((await h.call('DELETE', '/schedulers/graveyard/dead/d2')).statusCode, 204);
    const missing = await h.call('DELETE', '/schedulers/graveyard/dead/d2');
    assert.equal(missing.statusCode, 404);
    assert.equal(missing.json().error.code, 'task_not_found');
    assert.equal((await h.call('DELETE', '/schedulers/graveyard/dead/d1', undefined, { key: null })).statusCode, 401);
    // Deliveries run concurrently, so d1 and d3 may have died in either order.
    assert.deepEqual((await dead('graveyard')).dead.map((d) => d.id).sort(), ['d1', 'd3']);
    // Deleting the scheduler deletes its dead tasks: a new one of that id starts empty.
    assert.equal((await h.call('DELETE', '/schedulers/graveyard')).statusCode, 204);
    await h.createScheduler('graveyard');
    assert.equal((await dead('graveyard')).meta.total, 0);
  });

  it('never returns, lists or stores the secret in clear; bad targets and retry policies are 400s that change nothing', async () => {
    const created = await h.call('POST', '/schedulers', {
      id: 'secretive',
      display_name: 'Secretive',
      target: { url: 'https://hooks.example.com/in', secret: SECRET },
      retry: { max_attempts: 3 },
    });
    assert.equal(created.statusCode, 201);
    const digest = await storeDigest(h.service.store.sql);
    const bad: [unknown, RegExp][] = [
      [{ target: { url: 'ftp://x.example.com/', secret: SECRET } }, /target\.url/],
      [{ target: { url: 'not a url', secret: SECRET } }, /target\.url/],
      [{ target: { url: 'https://user:pw@x.example.com/', secret: SECRET } }, /target\.url/],
      [{ target: { url: 'https://x.example.com/', secret: 'short' } }, /secret/],
      [{ target: { url: 'https://x.example.com/' } }, /.+/],
      [{ target: { lambda_id: 'l-1' } }, /target\.lambda_id/],
      [{ target: { lambda_id: 'l-1', url: 'https://x.example.com/', secret: SECRET } }, /.+/],
      [{ retry: { max_attempts: 0 } }, /max_attempts/],
      [{ retry: { base: '0s' } }, /retry\.base/],
      [{ retry: { base: '10' } }, /retry\.base/],
      [{ retry: { base: '1m', cap: '10s' } }, /retry\.cap/],
      [{ retry: { cap: '25h' } }, /retry\.cap/],
      [{ retry: { factor: 0.5 } }, /factor/],
      [{ retry: { extra: 1 } }, /.+/],
    ];
    for (const [change, message] of bad) {
      for (const [method, url, body] of [
        ['PATCH', '/schedulers/secretive', change],
        ['PUT', '/schedulers/secretive', { display_name: 'x', ...(change as object) }],
        ['POST', '/schedulers', { id: 'other', display_name: 'x', ...(change as object) }],
      ] as const) {
        const res = await h.call(method, url, body);
        assert.equal(res.statusCode, 400, `${method} ${JSON.stringify(change)}: ${res.body}`);
        assert.equal(res.json().error.code, 'validation_error');
        assert.match(res.json().error.message, message);
        assert.ok(!res.body.includes(SECRET));
      }
    }
    assert.deepEqual(await storeDigest(h.service.store.sql), digest, 'nothing changed');
    for (const path of ['/schedulers/secretive', '/schedulers', '/openapi.json']) {
      const res = await h.call('GET', path);
      assert.equal(res.statusCode, 200);
      assert.ok(!res.body.includes(SECRET), path);
    }
    const stored = JSON.stringify(
      await h.service.store.sql.database.read(() => all('select * from scheduler_schedulers')),
    );
    assert.ok(!stored.includes(SECRET), 'the database holds the secret sealed');
    assert.ok(stored.includes('hooks.example.com'));
    // PATCH without target keeps it; target: null removes it (and the retry policy stays shown only while set).
    const patched = await h.call('PATCH', '/schedulers/secretive', { display_name: 'Renamed' });
    assert.deepEqual(patched.json().target, { url: 'https://hooks.example.com/in', secret_set: true });
    const removed = await h.call('PATCH', '/schedulers/secretive', { target: null, retry: null });
    assert.equal(removed.statusCode, 200);
    assert.deepEqual(Object.keys(removed.json()), [
      'id',
      'display_name',
      'ready',
      'scheduled',
      'inflight',
      'created_at',
      'updated_at',
    ]);
  });

  it('delivers 1,000 tasks exactly once each', async () => {
    status = 200;
    await hooked('bulk', 'Bulk');
    const before = hook.received.length;
    const ids = Array.from({ length: 1000 }, (_, n) => `bulk-${n}`);
    for (let at = 0; at < ids.length; at += 100)
      await Promise.all(ids.slice(at, at + 100).map((id) => h.enqueue('bulk', { id, payload: { id } })));
    await until(
      () => tasks('bulk'),
      (l) => l.scheduled_meta.total === 0 && l.inflight_meta.total === 0,
      60_000,
    );
    const seen = hook.received.slice(before).map((r) => r.headers['stratus-task-id'] as string);
    assert.equal(new Set(seen).size, 1000);
    assert.equal(seen.length, 1000, 'no task was delivered twice');
    assert.deepEqual(new Set(seen), new Set(ids));
    assert.ok(hook.received.slice(before).every((r) => r.verified));
  });

  it('two instances on one database share the deliveries: 1,000 tasks, each delivered once', async () => {
    status = 200;
    // A second instance of the service on the same store (PostgreSQL: LISTEN/NOTIFY between them).
    const second = await schedulerService.build({
      settings: h.service.settings,
      store: h.service.store,
      logger: pino({ level: 'silent' }),
      version: VERSION,
    });
    await second.ready();
    try {
      const before = hook.received.length;
      // Set on the first instance; the second reads it from the notifier's message or its periodic read.
      await hooked('shared', 'Shared');
      const ids = Array.from({ length: 1000 }, (_, n) => `shared-${n}`);
      for (let at = 0; at < ids.length; at += 100)
        await Promise.all(ids.slice(at, at + 100).map((id) => h.enqueue('shared', { id })));
      await until(
        () => tasks('shared'),
        (l) => l.scheduled_meta.total === 0 && l.inflight_meta.total === 0,
        60_000,
      );
      const seen = hook.received.slice(before).map((r) => r.headers['stratus-task-id'] as string);
      assert.equal(seen.length, 1000, 'no task was delivered twice');
      assert.deepEqual(new Set(seen), new Set(ids));
    } finally {
      await second.close();
    }
  });
});
