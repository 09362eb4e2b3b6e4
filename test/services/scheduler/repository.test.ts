import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SchedulerRepository } from '../../../src/services/scheduler/repository.ts';
import { schedulerMigrations } from '../../../src/services/scheduler/migrations.ts';
import type { SqlConnection } from '../../../src/store/db.ts';
import { migrate } from '../../../src/store/migrate.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';

let database: TestDatabase;
let connection: SqlConnection;
after(async () => {
  await connection?.close();
  await database?.cleanup();
});

async function repository(): Promise<SchedulerRepository> {
  database = await createTestDatabase();
  connection = await database.connect();
  await migrate(connection.database, [schedulerMigrations]);
  return new SchedulerRepository(connection);
}

describe('scheduler repository: concurrent enqueues share a statement', () => {
  it('each call gets its own outcome, and the tasks keep the order they were enqueued in', async () => {
    const tasks = await repository();
    const now = Date.now();
    assert.equal(await tasks.createScheduler('a', 'a', null, now), true);
    assert.equal(await tasks.createScheduler('b', 'b', null, now), true);
    assert.equal(await tasks.enqueue('a', 'old', '{}', '[]', now), 'created');
    // Issued in one turn. On PostgreSQL the first two go at once (as many writes as may be in
    // flight), the rest wait for them and are written together, in one batch holding a repeated id,
    // an id already in use, a missing scheduler and the same id in another scheduler. On SQLite each
    // goes at once, in the adapter's group commit.
    const calls: [string, string][] = [
      ['b', 'first'],
      ['b', 'second'],
      ['a', 't0'],
      ['a', 't1'],
      ['a', 't2'],
      ['a', 't1'],
      ['a', 'old'],
      ['missing', 't3'],
      ['b', 't1'],
      ['a', 't3'],
      ['missing', 't3'],
      ['a', 't4'],
    ];
    const outcomes = await Promise.all(
      calls.map(([scheduler, id]) => tasks.enqueue(scheduler, id, `"${id}"`, '[]', now)),
    );
    assert.deepEqual(outcomes, [
      'created',
      'created',
      'created',
      'created',
      'created',
      'exists',
      'exists',
      'not_found',
      'created',
      'created',
      'not_found',
      'created',
    ]);
    const page = { page: 1, perPage: 100 };
    const listed = await tasks.listTasks('a', { labels: [] }, page, page, now);
    assert.deepEqual(
      listed.scheduled.map((task) => task.id),
      ['old', 't0', 't1', 't2', 't3', 't4'],
    );
    const other = await tasks.listTasks('b', { labels: [] }, page, page, now);
    assert.deepEqual(other.scheduled.map((task) => task.id).sort(), ['first', 'second', 't1'].sort());
  });

  it('many concurrent enqueues all land', async () => {
    const tasks = await repository();
    const now = Date.now();
    await tasks.createScheduler('many', 'many', null, now);
    const ids = Array.from({ length: 2_000 }, (_, i) => `t${String(i).padStart(4, '0')}`);
    const outcomes = await Promise.all(ids.map((id) => tasks.enqueue('many', id, '{}', '["x"]', now + 1)));
    assert.ok(outcomes.every((outcome) => outcome === 'created'));
    const page = { page: 1, perPage: 2_000 };
    const listed = await tasks.listTasks('many', { labels: [] }, page, page, now);
    // Concurrent calls have no order among them (batches in flight together commit in either order).
    assert.deepEqual(listed.scheduled.map((task) => task.id).sort(), ids);
  });
});

describe('scheduler repository: concurrent reserves and acknowledges share a statement', () => {
  it('each reserve gets its own task, in due order, under its own lease and worktime', async () => {
    const tasks = await repository();
    const now = Date.now();
    await tasks.createScheduler('a', 'a', null, now);
    await tasks.createScheduler('b', 'b', null, now);
    for (const [i, id] of ['t0', 't1', 't2', 't3', 't4', 't5'].entries())
      await tasks.enqueue('a', id, `"${id}"`, '["x"]', now - 100 + i);
    await tasks.enqueue('a', 'later', '"later"', '[]', now + 60_000);
    await tasks.enqueue('b', 'u0', '"u0"', '[]', now - 1);
    // Issued in one turn. On PostgreSQL the first two go at once, the rest wait for them and are
    // claimed together, in one batch over two schedulers with more reserves than due tasks of `a`.
    const calls: [string, number][] = [
      ['a', 1_000],
      ['a', 2_000],
      ['a', 3_000],
      ['b', 4_000],
      ['a', 5_000],
      ['a', 6_000],
      ['a', 7_000],
      ['a', 8_000],
      ['b', 9_000],
    ];
    const claimed = await Promise.all(calls.map(([scheduler, worktime]) => tasks.claim(scheduler, now, worktime)));
    const ids = claimed.map((c) => c?.id);
    assert.deepEqual(ids.filter((id) => id?.startsWith('t')).sort(), ['t0', 't1', 't2', 't3', 't4', 't5']);
    // Past the first two (which went at once, in either order), in the order the calls were made.
    const after = ids.slice(2).filter((id) => id?.startsWith('t'));
    assert.deepEqual(after, [...after].sort());
    // Each lease runs for its own worktime.
    claimed.forEach((c, i) => c && assert.equal(Number(c.due_ms) - now, calls[i]![1]));
    assert.equal(ids.filter((id) => id === 'u0').length, 1);
    assert.equal(ids.filter((id) => id === undefined).length, 2, 'one reserve of each scheduler found nothing');
    assert.equal(new Set(claimed.flatMap((c) => (c ? [c.lease_id] : []))).size, 7);
    for (const c of claimed) if (c) assert.equal(c.payload, `"${c.id}"`);
  });

  it('each acknowledge gets the outcome it would have had alone', async () => {
    const tasks = await repository();
    const now = Date.now();
    await tasks.createScheduler('a', 'a', null, now);
    await tasks.createScheduler('b', 'b', null, now);
    for (const id of ['t0', 't1', 't2', 't3']) await tasks.enqueue('a', id, '{}', '[]', now - 10);
    await tasks.enqueue('b', 'u0', '{}', '[]', now - 10);
    await tasks.enqueue('a', 'waiting', '{}', '[]', now + 60_000);
    const lease = new Map<string, string>();
    for (const [scheduler, worktime] of [
      ['a', 60_000],
      ['a', 60_000],
      ['a', 60_000],
      ['a', 1_000],
      ['b', 60_000],
    ] as const) {
      const c = await tasks.claim(scheduler, now, worktime);
      lease.set(c!.id, c!.lease_id);
    }
    // t3's lease (1 s) has run out at `later`; the others have not.
    const later = now + 2_000;
    const calls: [string, string, string][] = [
      ['a', 't0', lease.get('t0')!],
      ['a', 't1', lease.get('t1')!],
      ['a', 't2', lease.get('t2')!],
      ['a', 't2', lease.get('t2')!],
      ['a', 't2', lease.get('t0')!],
      ['b', 'u0', lease.get('u0')!],
      ['a', 't3', lease.get('t3')!],
      ['a', 'waiting', lease.get('t0')!],
      ['a', 'gone', lease.get('t0')!],
      ['missing', 't0', lease.get('t0')!],
    ];
    const outcomes = await Promise.all(calls.map(([s, id, l]) => tasks.acknowledge(s, id, l, later)));
    assert.deepEqual(outcomes, [
      'done',
      'done',
      'done',
      'task_not_found',
      'task_not_found',
      'done',
      'lease_mismatch',
      'lease_mismatch',
      'task_not_found',
      'not_found',
    ]);
    const page = { page: 1, perPage: 100 };
    const left = await tasks.listTasks('a', { labels: [] }, page, page, later);
    assert.deepEqual(left.scheduled.map((t) => t.id).sort(), ['t3', 'waiting']);
  });
});
