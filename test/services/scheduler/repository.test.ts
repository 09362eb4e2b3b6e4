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
