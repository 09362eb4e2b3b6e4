import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { OngoingInvocations, type Ongoing } from '../../../src/services/lambda/ongoing.ts';
import { lambdaMigrations } from '../../../src/services/lambda/migrations.ts';
import type { SqlConnection } from '../../../src/store/db.ts';
import { migrate } from '../../../src/store/migrate.ts';
import { all } from '../../../src/store/sql-work.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';

const entry = (id: string, owner = 'user-ada'): Ongoing => ({
  id,
  owner,
  lambda_id: `lambda-${id}`,
  lambda_name: `name-${id}`,
  started_at: new Date().toISOString(),
  method: 'GET',
  path: `/${id}`,
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// Two instances over one database (two connections, as two processes have): README: Ongoing invocations.
describe('lambda: ongoing invocations shared by instances', () => {
  let database: TestDatabase;
  let connections: SqlConnection[] = [];

  before(async () => {
    database = await createTestDatabase();
    connections = [await database.connect(), await database.connect()];
    await migrate(connections[0]!.database, [lambdaMigrations]);
  });
  after(async () => {
    for (const connection of connections) await connection.close();
    await database.cleanup();
  });

  const rows = async () =>
    connections[0]!.database.read(() =>
      all<{ id: string; instance: string }>('select id, instance from lambda_ongoing order by id'),
    );

  it('lists what runs on another instance while it runs, and forgets it when it ends', async () => {
    const a = new OngoingInvocations(connections[0]!, undefined, { publishMs: 20 });
    const b = new OngoingInvocations(connections[1]!, undefined, { publishMs: 20 });
    try {
      a.start(entry('one'));
      b.start(entry('two'));
      b.start(entry('bob', 'user-bob'));
      assert.deepEqual(
        (await a.list('user-ada')).map((o) => o.id),
        ['one'],
        'its own are listed at once, from memory',
      );
      // Each instance lists its own from memory and the other's once that one has published them.
      await waitFor(async () => (await a.list('user-ada')).length === 2);
      await waitFor(async () => (await b.list('user-ada')).length === 2);
      const listed = await b.list('user-ada');
      assert.deepEqual(listed.map((o) => o.id).sort(), ['one', 'two']);
      const one = listed.find((o) => o.id === 'one')!;
      assert.deepEqual(one, {
        id: 'one',
        lambda_id: 'lambda-one',
        lambda_name: 'name-one',
        started_at: one.started_at,
        method: 'GET',
        path: '/one',
      });
      assert.deepEqual(
        (await a.list('user-bob')).map((o) => o.id),
        ['bob'],
        'an owner sees only their own',
      );
      a.end('one');
      await waitFor(async () => (await b.list('user-ada')).length === 1);
      assert.deepEqual((await rows()).map((r) => r.id).sort(), ['bob', 'two']);
    } finally {
      await a.close();
      await b.close();
    }
    assert.deepEqual(await rows(), [], 'a clean shutdown leaves no rows behind');
  });

  it('ends the rows of an instance that stopped renewing them when their lease ends', async () => {
    const leaseMs = 10_000;
    // `dead` never publishes by itself (a very long delay): the test drives it, then it "dies".
    const dead = new OngoingInvocations(connections[0]!, undefined, { leaseMs, publishMs: 1_000_000_000 });
    const alive = new OngoingInvocations(connections[1]!, undefined, { leaseMs, publishMs: 1_000_000_000 });
    try {
      const now = Date.now();
      dead.start(entry('stuck'));
      await dead.publish(now);
      assert.deepEqual(
        (await alive.list('user-ada', now + 1_000)).map((o) => o.id),
        ['stuck'],
      );
      assert.deepEqual(await alive.list('user-ada', now + leaseMs), [], 'not listed once the lease has ended');
      alive.start(entry('fresh'));
      await alive.publish(now + leaseMs);
      assert.deepEqual(
        (await rows()).map((r) => r.id),
        ['fresh'],
        'the next publication deletes the expired rows',
      );
      // A live instance renews its lease while its invocations run (a third of it before it ends).
      const renewedAt = now + leaseMs + (leaseMs * 2) / 3;
      await alive.publish(renewedAt);
      const leases = await connections[0]!.database.read(() =>
        all<{ id: string; lease_until: number }>('select id, lease_until from lambda_ongoing'),
      );
      assert.deepEqual(
        leases.map((r) => [r.id, Number(r.lease_until)]),
        [['fresh', Math.floor(renewedAt + leaseMs)]],
      );
      alive.end('fresh');
    } finally {
      await alive.close();
      await dead.close();
    }
  });
});
