import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SchedulerRepository, type Page, type TaskFilter } from '../../../src/services/scheduler/repository.ts';
import {
  MAX_LABEL_FILTERS,
  MAX_LABEL_LENGTH,
  MAX_LABELS,
  MAX_SEARCH_LENGTH,
} from '../../../src/services/scheduler/schemas.ts';
import { all } from '../../../src/store/sql-work.ts';
import { assertError } from '../../helpers/envelope.ts';
import { storeDigest } from '../../helpers/platform.ts';
import { startScheduler, type SchedulerHarness } from './helpers.ts';

// Issue 17: task lists are bounded per request (search text, label filters) and per task
// (labels), and on SQLite they are read in slices; the slices must give the same answers.

describe('scheduler: limits on task lists', () => {
  let h: SchedulerHarness;
  before(async () => {
    h = await startScheduler();
    await h.createScheduler('lim');
  });
  after(async () => {
    await h.close();
  });

  const digest = () => storeDigest(h.service.store.sql);

  it(`refuses a search longer than ${MAX_SEARCH_LENGTH} characters and more than ${MAX_LABEL_FILTERS} label filters`, async () => {
    await h.enqueue('lim', { id: 'one', payload: { text: 'x'.repeat(300) }, labels: ['a:b'] });
    const ok = await h.call('GET', `/schedulers/lim/tasks?search=${'x'.repeat(MAX_SEARCH_LENGTH)}`);
    assert.equal(ok.statusCode, 200, ok.body);
    assert.equal(ok.json().scheduled_meta.total, 1);
    assert.match(
      assertError(
        await h.call('GET', `/schedulers/lim/tasks?search=${'x'.repeat(MAX_SEARCH_LENGTH + 1)}`),
        400,
        'validation_error',
      ),
      /256/,
    );
    const labels = Array.from({ length: MAX_LABEL_FILTERS + 1 }, (_, i) => `label=k:${i}`).join('&');
    assertError(await h.call('GET', `/schedulers/lim/tasks?${labels}`), 400, 'validation_error');
    assertError(
      await h.call('GET', `/schedulers/lim/tasks?label=k:${'v'.repeat(MAX_LABEL_LENGTH)}`),
      400,
      'validation_error',
    );
    // The stream takes the same query.
    assertError(
      await h.call('GET', `/schedulers/lim/tasks/stream?search=${'x'.repeat(MAX_SEARCH_LENGTH + 1)}`),
      400,
      'validation_error',
    );
  });

  it(`refuses a task with more than ${MAX_LABELS} labels or a label over ${MAX_LABEL_LENGTH} characters, storing nothing`, async () => {
    const before = await digest();
    assertError(
      await h.call('POST', '/schedulers/lim/tasks', {
        id: 'many',
        labels: Array.from({ length: MAX_LABELS + 1 }, (_, i) => `k:${i}`),
      }),
      400,
      'validation_error',
    );
    assertError(
      await h.call('POST', '/schedulers/lim/tasks', { id: 'long', labels: [`k:${'v'.repeat(MAX_LABEL_LENGTH)}`] }),
      400,
      'validation_error',
    );
    assert.deepEqual(await digest(), before);
    await h.enqueue('lim', {
      id: 'most',
      labels: Array.from({ length: MAX_LABELS }, (_, i) => `k:${i}`.padEnd(MAX_LABEL_LENGTH, 'v')),
    });
  });
});

describe('scheduler: task lists read in slices agree with a plain reading', () => {
  let h: SchedulerHarness;
  let small: SchedulerRepository;
  before(async () => {
    h = await startScheduler();
    // Tiny windows: every list crosses many of them.
    small = new SchedulerRepository(h.service.store.sql, { count: 7, searchBytes: 200, probeRows: 5 });
    await h.createScheduler('a');
    await h.createScheduler('b');
    // Interleaved, so each scheduler's sequence numbers have gaps.
    for (let i = 0; i < 60; i++) {
      const scheduler = i % 3 === 0 ? 'b' : 'a';
      await h.enqueue(scheduler, {
        id: `t${i}`,
        payload: { n: i, text: i % 4 === 0 ? 'needle'.repeat(i % 8 === 0 ? 20 : 1) : 'hay' },
        labels: [`n:${i % 5}`, i % 2 ? 'odd:yes' : 'even:yes'],
      });
    }
    // Some tasks in flight: due ones are claimed in due order.
    for (let i = 0; i < 9; i++)
      assert.equal((await h.call('POST', '/schedulers/a/tasks/reserve', { worktime: '1h' })).statusCode, 200);
  });
  after(async () => {
    await h.close();
  });

  /** The same answer from the whole table, read at once and filtered here. */
  const reference = async (scheduler: string, filter: TaskFilter, scheduled: Page, inflight: Page, now: number) => {
    const rows = await h.service.store.sql.database.read(() =>
      all<{ id: string; due_ms: number | string; labels: string; lease_id: string | null; payload: string }>(
        'select seq, id, due_ms, labels, lease_id, payload from scheduler_tasks where scheduler_id = ? order by seq',
        scheduler,
      ),
    );
    const kept = rows.filter(
      (row) =>
        (!filter.search || row.payload.includes(filter.search)) &&
        filter.labels.every((label) => (JSON.parse(row.labels) as string[]).includes(label)),
    );
    const isInflight = (row: (typeof rows)[number]) => row.lease_id !== null && Number(row.due_ms) > now;
    const page = (list: typeof rows, p: Page) =>
      list.slice((p.page - 1) * p.perPage, p.page * p.perPage).map((row) => row.id);
    const s = kept.filter((row) => !isInflight(row));
    const f = kept.filter(isInflight);
    return {
      scheduled: page(s, scheduled),
      inflight: page(f, inflight),
      scheduledTotal: s.length,
      inflightTotal: f.length,
    };
  };

  it('counts, pages and filters alike', async () => {
    const now = Date.now();
    const filters: TaskFilter[] = [
      { labels: [] },
      { search: 'needle', labels: [] },
      { labels: ['odd:yes'] },
      { search: '"n":1', labels: ['n:1', 'odd:yes'] },
      { search: 'absent', labels: [] },
    ];
    const pages: Page[] = [
      { page: 1, perPage: 3 },
      { page: 2, perPage: 3 },
      { page: 4, perPage: 5 },
      { page: 1, perPage: 500 },
      { page: 30, perPage: 2 },
    ];
    for (const scheduler of ['a', 'b']) {
      for (const filter of filters) {
        for (const p of pages) {
          const got = await small.listTasks(scheduler, filter, p, { page: p.page, perPage: p.perPage + 1 }, now);
          const expected = await reference(scheduler, filter, p, { page: p.page, perPage: p.perPage + 1 }, now);
          const what = `${scheduler} ${JSON.stringify(filter)} ${JSON.stringify(p)}`;
          assert.deepEqual(
            {
              scheduled: got.scheduled.map((t) => t.id),
              inflight: got.inflight.map((t) => t.id),
              scheduledTotal: got.scheduledTotal,
              inflightTotal: got.inflightTotal,
            },
            expected,
            what,
          );
        }
      }
      const all = await reference(scheduler, { labels: [] }, { page: 1, perPage: 500 }, { page: 1, perPage: 500 }, now);
      assert.deepEqual(await small.counts(scheduler, now), {
        scheduled: all.scheduledTotal,
        inflight: all.inflightTotal,
      });
      const row = await small.getScheduler(scheduler, now);
      assert.equal(Number(row?.total), all.scheduledTotal + all.inflightTotal);
      assert.equal(Number(row?.inflight), all.inflightTotal);
    }
    const listed = await small.listSchedulers(now);
    assert.deepEqual(
      listed.map((row) => [row.id, Number(row.total), Number(row.inflight)]),
      [
        ['a', 40, 9],
        ['b', 20, 0],
      ],
    );
    assert.equal((await small.counts('none', now)).scheduled, 0);
  });
});
