import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { UUID_V4, assertError } from '../../helpers/envelope.ts';
import { SchedulerRepository } from '../../../src/services/scheduler/repository.ts';
import { startScheduler, type SchedulerHarness } from './helpers.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Resolves once a reserve on `schedulerId` has found nothing due and is about to wait: the server
 * looks up the next due time only then (seen by wrapping the repository, not guessed with a sleep).
 * Call it before starting the reserve; it fails after 10 s.
 */
async function reserveWaits(schedulerId: string): Promise<void> {
  const { nextDue } = SchedulerRepository.prototype;
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`no reserve waited on ${schedulerId} within 10 s`)), 10_000);
      SchedulerRepository.prototype.nextDue = async function (
        this: SchedulerRepository,
        ...args: Parameters<typeof nextDue>
      ) {
        const next = await nextDue.apply(this, args);
        if (args[0] === schedulerId) resolve();
        return next;
      };
    });
  } finally {
    clearTimeout(timer);
    SchedulerRepository.prototype.nextDue = nextDue;
  }
}

describe('scheduler: tasks', () => {
  let h: SchedulerHarness;
  before(async () => {
    h = await startScheduler();
  });
  after(async () => {
    await h.close();
  });

  const reserve = (scheduler: string, worktime: unknown = '30s') =>
    h.call('POST', `/schedulers/${scheduler}/tasks/reserve`, { worktime });

  describe('enqueue', () => {
    before(async () => h.createScheduler('enq'));

    it('enqueues with a generated task-<uuid>, due now, null payload and no labels', async () => {
      const before = Date.now();
      const res = await h.call('POST', '/schedulers/enq/tasks', {});
      assert.equal(res.statusCode, 202);
      const body = res.json();
      assert.deepEqual(Object.keys(body), ['id', 'future', 'labels']);
      assert.match(body.id, new RegExp(`^task-${UUID_V4.source.slice(1, -1)}$`));
      assert.deepEqual(body.labels, []);
      assert.match(body.future, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
      assert.ok(Math.abs(Date.parse(body.future) - before) < 2000);
    });

    it('takes delay, future (any offset, fractions) and labels', async () => {
      const delayed = await h.enqueue('enq', {
        id: 'delayed',
        delay: '1h',
        labels: ['project:onboarding', 'priority:high'],
      });
      assert.ok(Math.abs(Date.parse(delayed.future) - (Date.now() + 3600_000)) < 2000);
      assert.deepEqual(delayed.labels, ['project:onboarding', 'priority:high']);
      const future = await h.enqueue('enq', { id: 'future', future: '2030-01-01T02:00:00.987+02:00' });
      assert.equal(future.future, '2030-01-01T00:00:00Z');
      const past = await h.enqueue('enq', { id: 'past', future: '2001-01-01T00:00:00Z', payload: { a: 1 } });
      assert.equal(past.future, '2001-01-01T00:00:00Z');
      const negative = await h.enqueue('enq', { id: 'negative', delay: '-1h' });
      assert.ok(Date.parse(negative.future) < Date.now());
    });

    it('rejects bad bodies with 400 validation_error and enqueues nothing', async () => {
      const total = async () => (await h.call('GET', '/schedulers/enq/tasks')).json().scheduled_meta.total;
      const count = await total();
      const cases: unknown[] = [
        { delay: '60' },
        { delay: '' },
        { delay: 60 },
        { delay: '1d' },
        { delay: '300000000h' },
        { future: '2030-01-01' },
        { future: 'tomorrow' },
        { future: '2030-13-01T00:00:00Z' },
        { delay: '1s', future: '2030-01-01T00:00:00Z' },
        { labels: ['nocolon'] },
        { labels: 'a:b' },
        { labels: [1] },
        { id: 'bad id' },
        { id: '' },
        { extra: true },
        [1, 2],
        'null',
      ];
      for (const body of cases)
        assertError(await h.call('POST', '/schedulers/enq/tasks', body), 400, 'validation_error');
      assertError(await h.call('POST', '/schedulers/enq/tasks', '{"payload":'), 400, 'invalid_json');
      assert.equal(await total(), count);
    });

    it('404 not_found for an unknown scheduler; 409 task_already_exists for a used id', async () => {
      assertError(await h.call('POST', '/schedulers/nope/tasks', {}), 404, 'not_found');
      await h.enqueue('enq', { id: 'dup', payload: 1 });
      assertError(await h.call('POST', '/schedulers/enq/tasks', { id: 'dup', payload: 2 }), 409, 'task_already_exists');
      await h.createScheduler('enq-2');
      await h.enqueue('enq-2', { id: 'dup' }); // ids are unique per scheduler only
    });
  });

  describe('list', () => {
    before(async () => {
      await h.createScheduler('lst');
      for (let i = 0; i < 7; i++)
        await h.enqueue('lst', {
          id: `t${i}`,
          payload: { n: i, kind: i % 2 ? 'Odd' : 'even' },
          labels: [`n:${i}`, i % 2 ? 'parity:odd' : 'parity:even', 'all:yes'],
        });
    });

    it('lists both lists with defaults, in enqueue order', async () => {
      const first = await reserve('lst');
      assert.equal(first.json().id, 't0');
      const res = await h.call('GET', '/schedulers/lst/tasks', undefined, { key: null });
      assert.equal(res.statusCode, 200);
      const body = res.json();
      assert.deepEqual(
        body.scheduled.map((t: { id: string }) => t.id),
        ['t1', 't2', 't3', 't4', 't5', 't6'],
      );
      assert.deepEqual(Object.keys(body.scheduled[0]), ['id', 'future', 'labels']);
      assert.deepEqual(body.inflight, [
        { id: 't0', lease_expires_at: first.json().lease_expires_at, labels: ['n:0', 'parity:even', 'all:yes'] },
      ]);
      assert.deepEqual(body.scheduled_meta, { total: 6, page: 1, per_page: 20, total_pages: 1 });
      assert.deepEqual(body.inflight_meta, { total: 1, page: 1, per_page: 20, total_pages: 1 });
    });

    it('paginates the two lists independently; past the end is empty with correct meta', async () => {
      const body = (
        await h.call(
          'GET',
          '/schedulers/lst/tasks?scheduled_page=2&scheduled_per_page=4&inflight_page=3&inflight_per_page=1',
        )
      ).json();
      assert.deepEqual(
        body.scheduled.map((t: { id: string }) => t.id),
        ['t5', 't6'],
      );
      assert.deepEqual(body.scheduled_meta, { total: 6, page: 2, per_page: 4, total_pages: 2 });
      assert.deepEqual(body.inflight, []);
      assert.deepEqual(body.inflight_meta, { total: 1, page: 3, per_page: 1, total_pages: 1 });
    });

    it('filters by payload substring (case-sensitive) and by every given label', async () => {
      const odd = (await h.call('GET', '/schedulers/lst/tasks?search=%22Odd%22')).json();
      assert.deepEqual(
        odd.scheduled.map((t: { id: string }) => t.id),
        ['t1', 't3', 't5'],
      );
      assert.equal((await h.call('GET', '/schedulers/lst/tasks?search=odd')).json().scheduled_meta.total, 0);
      const labelled = (await h.call('GET', '/schedulers/lst/tasks?label=parity:even&label=all:yes')).json();
      assert.deepEqual(
        labelled.scheduled.map((t: { id: string }) => t.id),
        ['t2', 't4', 't6'],
      );
      assert.deepEqual(
        labelled.inflight.map((t: { id: string }) => t.id),
        ['t0'],
      );
      assert.deepEqual(
        (await h.call('GET', '/schedulers/lst/tasks?label=n:1')).json().scheduled.map((t: { id: string }) => t.id),
        ['t1'],
      );
      assert.equal((await h.call('GET', '/schedulers/lst/tasks?label=parity:eve')).json().scheduled_meta.total, 0);
      const empty = (await h.call('GET', '/schedulers/lst/tasks?label=none:here')).json();
      assert.deepEqual(empty.scheduled_meta, { total: 0, page: 1, per_page: 20, total_pages: 0 });
    });

    it('rejects bad pagination with 400 and an unknown scheduler with 404', async () => {
      for (const q of [
        'scheduled_page=0',
        'scheduled_page=-1',
        'inflight_page=1.5',
        'scheduled_per_page=0',
        'inflight_per_page=501',
        'scheduled_page=abc',
        'label=nocolon',
      ]) {
        assertError(await h.call('GET', `/schedulers/lst/tasks?${q}`), 400, 'validation_error');
      }
      assert.equal((await h.call('GET', '/schedulers/lst/tasks?scheduled_per_page=500')).statusCode, 200);
      assertError(await h.call('GET', '/schedulers/nope/tasks'), 404, 'not_found');
    });
  });

  describe('reserve', () => {
    it('returns the earliest due task, ties in enqueue order, payload verbatim', async () => {
      await h.createScheduler('order');
      await h.enqueue('order', { id: 'late', future: '2001-01-01T00:00:05Z' });
      await h.enqueue('order', {
        id: 'tie-1',
        future: '2001-01-01T00:00:01Z',
        payload: { z: 1, a: [1, 'x', null], u: 'é' },
      });
      await h.enqueue('order', { id: 'tie-2', future: '2001-01-01T00:00:01Z' });
      await h.enqueue('order', { id: 'later', delay: '1h' });
      const first = await reserve('order');
      assert.equal(first.statusCode, 200);
      const body = first.json();
      assert.deepEqual(Object.keys(body), ['id', 'payload', 'lease_expires_at', 'labels', 'lease_id']);
      assert.equal(body.id, 'tie-1');
      assert.equal(JSON.stringify(body.payload), '{"z":1,"a":[1,"x",null],"u":"é"}');
      assert.match(body.lease_id, UUID_V4);
      assert.ok(Math.abs(Date.parse(body.lease_expires_at) - (Date.now() + 30_000)) < 2000);
      assert.equal((await reserve('order')).json().id, 'tie-2');
      assert.equal((await reserve('order')).json().id, 'late');
      const none = await reserve('order', '200ms');
      assert.equal(none.statusCode, 204);
      assert.equal(none.body, '');
    });

    it('validates worktime before looking up the scheduler', async () => {
      for (const worktime of [undefined, '', '0', '-1s', '60', 60, '25h', null]) {
        const res = await h.call('POST', '/schedulers/nope/tasks/reserve', worktime === undefined ? {} : { worktime });
        assertError(res, 400, 'validation_error');
      }
      assertError(await h.call('POST', '/schedulers/nope/tasks/reserve', '{'), 400, 'invalid_json');
      assertError(await reserve('nope'), 404, 'not_found');
    });

    it('long-polls: wakes on an enqueue and on a delayed task coming due', async () => {
      await h.createScheduler('poll');
      const started = Date.now();
      const waits = reserveWaits('poll');
      const waiting = reserve('poll', '10s');
      // Only once the reserve waits: a task already there would be taken without any waking.
      await waits;
      await h.enqueue('poll', { id: 'arrives' });
      const got = await waiting;
      assert.equal(got.statusCode, 200);
      assert.equal(got.json().id, 'arrives');
      assert.ok(Date.now() - started < 3000);
      await h.enqueue('poll', { id: 'soon', delay: '400ms' });
      const t0 = Date.now();
      const soon = await reserve('poll', '10s');
      assert.equal(soon.json().id, 'soon');
      assert.ok(Date.now() - t0 >= 300, 'not before it is due');
      assert.ok(Date.now() - t0 < 3000);
    });

    it('a reserve waiting on a scheduler that is deleted ends with 404', async () => {
      await h.createScheduler('doomed');
      // 30 s, the longest a reserve waits: within this test only the delete can end the wait.
      const waits = reserveWaits('doomed');
      const waiting = reserve('doomed', '30s');
      // Only once the reserve waits: one arriving after the delete would be a plain 404.
      await waits;
      assert.equal((await h.call('DELETE', '/schedulers/doomed')).statusCode, 204);
      let timer: NodeJS.Timeout | undefined;
      const ended = await Promise.race([
        waiting,
        new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), 10_000))),
      ]);
      clearTimeout(timer);
      assert.ok(ended, 'the delete ends the wait (not the 30 s deadline)');
      assertError(ended, 404, 'not_found');
    });
  });

  describe('acknowledge, cancel, extend, reschedule', () => {
    before(async () => h.createScheduler('ops'));

    it('acknowledges with and without lease_id; a stale lease is 409 lease_mismatch and changes nothing', async () => {
      await h.enqueue('ops', { id: 'a1' });
      const lease = (await reserve('ops')).json();
      assertError(await h.call('DELETE', `/schedulers/ops/tasks/a1?lease_id=${'0'.repeat(8)}`), 409, 'lease_mismatch');
      assertError(await h.call('DELETE', '/schedulers/ops/tasks/a1', { lease_id: 'other' }), 409, 'lease_mismatch');
      assertError(
        await h.call('DELETE', `/schedulers/ops/tasks/a1?lease_id=${lease.lease_id}`, { lease_id: 'other' }),
        400,
        'validation_error',
      );
      assert.equal((await h.call('GET', '/schedulers/ops/health')).json().inflight, 1);
      const ok = await h.call('DELETE', `/schedulers/ops/tasks/a1?lease_id=${lease.lease_id}`);
      assert.equal(ok.statusCode, 204);
      assert.equal(ok.body, '');
      assertError(await h.call('DELETE', '/schedulers/ops/tasks/a1'), 404, 'task_not_found');
      await h.enqueue('ops', { id: 'a1' }); // the id may be reused once gone
      const second = (await reserve('ops')).json();
      assert.equal((await h.call('DELETE', '/schedulers/ops/tasks/a1', { lease_id: second.lease_id })).statusCode, 204);
      await h.enqueue('ops', { id: 'a2' });
      await reserve('ops');
      assert.equal((await h.call('DELETE', '/schedulers/ops/tasks/a2')).statusCode, 204);
    });

    it('cancels a scheduled task; lease_id on a scheduled task is lease_mismatch', async () => {
      await h.enqueue('ops', { id: 'c1', delay: '1h' });
      assertError(await h.call('DELETE', '/schedulers/ops/tasks/c1?lease_id=x'), 409, 'lease_mismatch');
      assert.equal((await h.call('DELETE', '/schedulers/ops/tasks/c1')).statusCode, 204);
      assertError(await h.call('DELETE', '/schedulers/nope/tasks/c1'), 404, 'not_found');
      assertError(await h.call('DELETE', '/schedulers/ops/tasks/never'), 404, 'task_not_found');
    });

    it('extends from the current expiry; checks extension, state and lease', async () => {
      await h.enqueue('ops', { id: 'e1' });
      const lease = (await reserve('ops', '30s')).json();
      const res = await h.call('POST', '/schedulers/ops/tasks/e1/extend', {
        extension: '30s',
        lease_id: lease.lease_id,
      });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(Object.keys(res.json()), ['lease_expires_at']);
      assert.equal(Date.parse(res.json().lease_expires_at), Date.parse(lease.lease_expires_at) + 30_000);
      const again = await h.call('POST', `/schedulers/ops/tasks/e1/extend?lease_id=${lease.lease_id}`, {
        extension: '1m',
      });
      assert.equal(Date.parse(again.json().lease_expires_at), Date.parse(lease.lease_expires_at) + 90_000);
      assertError(await h.call('POST', '/schedulers/ops/tasks/e1/extend', { extension: '0s' }), 400, 'invalid_lease');
      assertError(await h.call('POST', '/schedulers/ops/tasks/e1/extend', { extension: '-5s' }), 400, 'invalid_lease');
      assertError(await h.call('POST', '/schedulers/ops/tasks/e1/extend', { extension: '5' }), 400, 'validation_error');
      assertError(await h.call('POST', '/schedulers/ops/tasks/e1/extend', { extension: 5 }), 400, 'validation_error');
      assertError(await h.call('POST', '/schedulers/ops/tasks/e1/extend', {}), 400, 'validation_error');
      assertError(
        await h.call('POST', '/schedulers/ops/tasks/e1/extend', { extension: '5s', lease_id: 'stale' }),
        409,
        'lease_mismatch',
      );
      await h.enqueue('ops', { id: 'e2', delay: '1h' });
      assertError(await h.call('POST', '/schedulers/ops/tasks/e2/extend', { extension: '5s' }), 409, 'conflict');
      assertError(
        await h.call('POST', '/schedulers/ops/tasks/none/extend', { extension: '5s' }),
        404,
        'task_not_found',
      );
      assertError(await h.call('POST', '/schedulers/nope/tasks/e1/extend', { extension: '5s' }), 404, 'not_found');
    });

    it('reschedules a scheduled task, keeping its payload, labels and order; 409 task_in_flight when leased', async () => {
      await h.createScheduler('resched');
      await h.enqueue('resched', { id: 'r1', delay: '1h', payload: 'keep', labels: ['k:v'] });
      await h.enqueue('resched', { id: 'r2', delay: '1h' });
      const res = await h.call('POST', '/schedulers/resched/tasks/r1/reschedule', { future: '2001-01-01T00:00:00Z' });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), { id: 'r1', future: '2001-01-01T00:00:00Z' });
      const delayed = await h.call('POST', '/schedulers/resched/tasks/r2/reschedule', { delay: '2h' });
      assert.ok(Math.abs(Date.parse(delayed.json().future) - (Date.now() + 7200_000)) < 2000);
      const list = (await h.call('GET', '/schedulers/resched/tasks')).json();
      assert.deepEqual(list.scheduled, [
        { id: 'r1', future: '2001-01-01T00:00:00Z', labels: ['k:v'] },
        { id: 'r2', future: delayed.json().future, labels: [] },
      ]);
      const lease = (await reserve('resched')).json();
      assert.deepEqual([lease.id, lease.payload, lease.labels], ['r1', 'keep', ['k:v']]);
      assertError(
        await h.call('POST', '/schedulers/resched/tasks/r1/reschedule', { delay: '1s' }),
        409,
        'task_in_flight',
      );
      for (const body of [
        {},
        { delay: '1s', future: '2030-01-01T00:00:00Z' },
        { delay: 'x' },
        { future: 'x' },
        { delay: 5 },
      ]) {
        assertError(await h.call('POST', '/schedulers/resched/tasks/r2/reschedule', body), 400, 'validation_error');
      }
      assertError(
        await h.call('POST', '/schedulers/resched/tasks/none/reschedule', { delay: '1s' }),
        404,
        'task_not_found',
      );
      assertError(await h.call('POST', '/schedulers/nope/tasks/r2/reschedule', { delay: '1s' }), 404, 'not_found');
    });
  });

  describe('lease expiry', () => {
    it('an expired lease returns the task, due at its expiry; the old lease can no longer acknowledge or extend', async () => {
      await h.createScheduler('exp');
      await h.enqueue('exp', { id: 'x1', payload: { job: 1 } });
      await h.enqueue('exp', { id: 'x2', delay: '1h' });
      const first = (await reserve('exp', '300ms')).json();
      assert.equal(first.id, 'x1');
      assert.equal((await h.call('GET', '/schedulers/exp/health')).json().inflight, 1);
      // A second worker waits: the expiry wakes it (a timer on the lease expiry, no enqueue involved).
      const t0 = Date.now();
      const second = await reserve('exp', '5s');
      assert.equal(second.statusCode, 200);
      assert.ok(Date.now() - t0 >= 200, 'not handed out while the first lease is live');
      const redelivered = second.json();
      assert.equal(redelivered.id, 'x1');
      assert.deepEqual(redelivered.payload, { job: 1 });
      assert.notEqual(redelivered.lease_id, first.lease_id);
      assertError(await h.call('DELETE', `/schedulers/exp/tasks/x1?lease_id=${first.lease_id}`), 409, 'lease_mismatch');
      assertError(
        await h.call('POST', '/schedulers/exp/tasks/x1/extend', { extension: '1s', lease_id: first.lease_id }),
        409,
        'lease_mismatch',
      );
      assert.equal(
        (await h.call('DELETE', `/schedulers/exp/tasks/x1?lease_id=${redelivered.lease_id}`)).statusCode,
        204,
      );
    });

    it('counts, lists and reschedule see an expired lease as scheduled before anything processes it', async () => {
      await h.createScheduler('exp2');
      await h.enqueue('exp2', { id: 'y' });
      const lease = (await reserve('exp2', '100ms')).json();
      await sleep(200);
      const health = (await h.call('GET', '/schedulers/exp2/health')).json();
      assert.deepEqual([health.scheduled, health.inflight], [1, 0]);
      const list = (await h.call('GET', '/schedulers/exp2/tasks')).json();
      assert.equal(list.scheduled[0].id, 'y');
      assert.equal(list.scheduled[0].future, lease.lease_expires_at);
      assertError(await h.call('POST', '/schedulers/exp2/tasks/y/extend', { extension: '1s' }), 409, 'conflict');
      assert.equal((await h.call('POST', '/schedulers/exp2/tasks/y/reschedule', { delay: '1h' })).statusCode, 200);
    });
  });
});
