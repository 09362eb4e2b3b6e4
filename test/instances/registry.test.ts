import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { InstanceRegistry, instancesMigrations, type CounterSource } from '../../src/instances/index.ts';
import type { SqlConnection } from '../../src/store/db.ts';
import { migrate } from '../../src/store/migrate.ts';
import { all, run } from '../../src/store/sql-work.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

const silent = pino({ level: 'silent' });
const TIMEOUT_MS = 900;

/** A counter source whose entries the test sets. */
class Source implements CounterSource {
  readonly owner = 'test';
  readonly values = new Map<string, number>();
  private readonly published = new Map<string, number>();
  changes(full: boolean): [string, unknown][] {
    const changed: [string, unknown][] = [];
    for (const [name, value] of this.values)
      if (full || this.published.get(name) !== value) {
        this.published.set(name, value);
        changed.push([name, { value }]);
      }
    return changed;
  }
}

describe('instance registry (src/instances/README.md)', () => {
  let database: TestDatabase;
  let a: SqlConnection;
  let b: SqlConnection;
  const registries: InstanceRegistry[] = [];
  const start = async (connection: SqlConnection, services = ['config']) => {
    const registry = await InstanceRegistry.start(connection.database, {
      version: '1.2.3',
      services,
      timeoutMs: TIMEOUT_MS,
      flushMs: 60_000, // the tests flush by hand
      logger: silent,
    });
    registries.push(registry);
    return registry;
  };
  const rows = (connection: SqlConnection) =>
    connection.database.read(() => all<{ id: string }>('select id from stratus_instances order by id'));

  before(async () => {
    database = await createTestDatabase();
    a = await database.connect();
    b = await database.connect();
    await migrate(a.database, [instancesMigrations]);
  });
  after(async () => {
    for (const registry of registries) await registry.close();
    await a.close();
    await b.close();
    await database.cleanup();
  });

  it('registers at start, lists the live instances oldest first, and removes itself on close', async () => {
    const first = await start(a, ['config', 'logs']);
    await new Promise((resolve) => setTimeout(resolve, 5)); // a later start
    const second = await start(b);
    const live = await first.live();
    assert.deepEqual(
      live.map((i) => i.id),
      [first.id, second.id],
    );
    assert.match(first.id, /^instance-[0-9a-f-]{36}$/);
    assert.equal(live[0]!.pid, process.pid);
    assert.equal(live[0]!.version, '1.2.3');
    assert.deepEqual(live[0]!.services, ['config', 'logs']);
    assert.deepEqual(
      (await second.live()).map((i) => i.id),
      [first.id, second.id],
      'every instance sees the same list',
    );
    await second.close();
    assert.deepEqual(
      (await first.live()).map((i) => i.id),
      [first.id],
    );
    assert.deepEqual(
      (await rows(a)).map((r) => r.id),
      [first.id],
      'a clean close deletes the row at once',
    );
    await first.close();
    assert.deepEqual(await rows(a), []);
  });

  it("publishes counters on flush and reads the other live instances' counters", async () => {
    const one = await start(a);
    const two = await start(b);
    const sourceOne = new Source();
    const sourceTwo = new Source();
    one.publish(sourceOne);
    two.publish(sourceTwo);
    sourceOne.values.set('x', 5);
    sourceTwo.values.set('x', 7);
    sourceTwo.values.set('y', 1);
    assert.deepEqual(await one.othersCounters('test'), [], 'nothing published before a flush');
    await Promise.all([one.flush(), two.flush()]);
    const seenByOne = (await one.othersCounters('test')).sort((p, q) => p.name.localeCompare(q.name));
    assert.deepEqual(seenByOne, [
      { instance: two.id, name: 'x', value: { value: 7 } },
      { instance: two.id, name: 'y', value: { value: 1 } },
    ]);
    assert.deepEqual(await two.othersCounters('test', 'x'), [{ instance: one.id, name: 'x', value: { value: 5 } }]);
    assert.deepEqual(await two.othersCounters('other'), [], 'owners are apart');

    // forget removes a name's counters of every instance.
    await one.forget('test', 'x');
    assert.deepEqual(await one.othersCounters('test', 'x'), []);
    assert.deepEqual(await two.othersCounters('test', 'x'), []);
    await one.close();
    await two.close();
  });

  it('leaves out an instance that stopped heartbeating, then sweeps it with its counters', async () => {
    const survivor = await start(a);
    // A crashed process: its row and counters stay behind, its heartbeat stops.
    const now = Date.now();
    await b.database.write(function* () {
      yield* run(
        'insert into stratus_instances (id, host, pid, version, services, started_at, last_seen) values (?, ?, ?, ?, ?, ?, ?)',
        'instance-crashed',
        'elsewhere',
        1,
        '1.2.3',
        '[]',
        now - 5000,
        now,
      );
      yield* run(
        "insert into stratus_instance_counters (instance_id, owner, name, value) values ('instance-crashed', 'test', 'x', '{\"value\":3}')",
      );
    });
    assert.deepEqual(
      (await survivor.live()).map((i) => i.id),
      ['instance-crashed', survivor.id],
    );
    assert.equal((await survivor.othersCounters('test')).length, 1);
    // Past the timeout it is out of every read; the survivor's heartbeats (every third of the
    // timeout) sweep its rows soon after.
    await new Promise((resolve) => setTimeout(resolve, TIMEOUT_MS + 100));
    assert.deepEqual(
      (await survivor.live()).map((i) => i.id),
      [survivor.id],
    );
    assert.deepEqual(await survivor.othersCounters('test'), []);
    await new Promise((resolve) => setTimeout(resolve, TIMEOUT_MS / 3 + 200));
    assert.deepEqual(
      (await rows(a)).map((r) => r.id),
      [survivor.id],
      'swept',
    );
    const counters = await a.database.read(() =>
      all("select instance_id from stratus_instance_counters where instance_id = 'instance-crashed'"),
    );
    assert.deepEqual(counters, [], 'its counters went with it');
    await survivor.close();
  });

  it('comes back with every counter when it was swept while alive', async () => {
    const paused = await start(a);
    const reader = await start(b);
    const source = new Source();
    paused.publish(source);
    source.values.set('kept', 4);
    await paused.flush();
    // Another instance swept it (as after a pause longer than the timeout).
    await b.database.write(() => run('delete from stratus_instances where id = ?', paused.id));
    assert.deepEqual(await reader.othersCounters('test'), []);
    source.values.set('changed', 1);
    await paused.flush();
    const back = (await reader.othersCounters('test')).map((c) => c.name).sort();
    assert.deepEqual(back, ['changed', 'kept'], 'unchanged counters are published again too');
    assert.ok((await reader.live()).some((i) => i.id === paused.id));
    await paused.close();
    await reader.close();
  });
});
