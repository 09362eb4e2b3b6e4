import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { startPlatform, type RunningPlatform } from '../../src/platform.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/http.ts';
import { testSettings } from '../helpers/service.ts';

interface Row {
  host: string;
  served_requests: number;
  serving_time: string;
  uptime: string;
  start_timestamp: string;
}
interface Instance {
  id: string;
  host: string;
  pid: number;
  services: string[];
  started_at: string;
  last_seen: string;
  served_requests: number;
  answering: boolean;
}

const FLUSH_SECONDS = 0.3;
const signedIn = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'user-ops' } }) };

// Two platforms in this process on one database (one PostgreSQL schema, or one SQLite file), as two
// instances of a scaled-out platform: /v0/stats answers the sum over both (src/gateway/README.md).
describe('platform-wide /v0/stats over two instances', () => {
  let database: TestDatabase;
  let a: RunningPlatform;
  let b: RunningPlatform | null;
  let statsCallsToA = 0;

  const statsOf = async (platform: RunningPlatform) => {
    if (platform === a) statsCallsToA++;
    const res = await request(platform.publicPort, { path: '/v0/stats', host: 'gateway.localhost' });
    assert.equal(res.status, 200);
    return res.json<Row[]>();
  };
  const served = (rows: Row[], host: string) => rows.find((r) => r.host === host)?.served_requests ?? 0;

  before(async () => {
    database = await createTestDatabase();
    const settings = testSettings(database, {
      port: 0,
      host: '127.0.0.1',
      internalPort: 0,
      internalHost: '127.0.0.1',
      services: ['config'],
      statsFlushSeconds: FLUSH_SECONDS,
      instanceTimeoutSeconds: 5,
    });
    const silent = pino({ level: 'silent' });
    a = await startPlatform(settings, silent);
    await new Promise((resolve) => setTimeout(resolve, 20)); // B starts later than A
    b = await startPlatform(settings, silent);
  });
  after(async () => {
    await b?.close();
    await a?.close();
    await database?.cleanup();
  });

  it('sums the requests of both instances within the flush interval', async () => {
    const N = 7;
    const M = 5;
    for (let i = 0; i < N; i++) await request(a.publicPort, { path: `/a/${i}`, host: 'config.localhost' });
    for (let i = 0; i < M; i++) await request(b!.publicPort, { path: `/b/${i}`, host: 'config.localhost' });
    await request(b!.publicPort, { path: '/', host: 'nowhere.example' });
    await request(b!.publicPort, { path: '/', host: 'nowhere.example' });
    const sent = performance.now();
    let rows = await statsOf(a);
    while (served(rows, 'config.localhost') < N + M || served(rows, '-noroute-') < 2) {
      assert.ok(performance.now() - sent < 10_000, `no sum after 10 s: ${JSON.stringify(rows)}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
      rows = await statsOf(a);
    }
    const waited = performance.now() - sent;
    // B publishes every FLUSH_SECONDS; a little room for a loaded 2-core machine.
    assert.ok(waited < FLUSH_SECONDS * 1000 + 1500, `the sum took ${Math.round(waited)} ms`);
    assert.equal(served(rows, 'config.localhost'), N + M, 'never more than was sent');
    assert.equal(served(rows, '-noroute-'), 2);
    assert.deepEqual(
      rows.map((r) => r.host),
      ['*', '-noroute-', 'config.localhost', 'gateway.localhost'],
      'hosts in order of their first request on any instance',
    );
    // A request is counted when its response has finished: an answer counts A's earlier stats
    // calls, not itself.
    assert.equal(served(rows, 'gateway.localhost'), statsCallsToA - 1);
    assert.equal(
      rows[0]!.served_requests,
      rows.slice(1).reduce((n, r) => n + r.served_requests, 0),
      '* is the sum of the other rows',
    );

    // B answers the same figures for what both published.
    let fromB = await statsOf(b!);
    while (served(fromB, 'config.localhost') < N + M) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      fromB = await statsOf(b!);
    }
    assert.equal(served(fromB, 'config.localhost'), N + M);
    assert.equal(served(fromB, '-noroute-'), 2);
  });

  it('lists the live instances at /v0/instances and in /v0/status for signed-in callers', async () => {
    const anonymous = await request(a.publicPort, { path: '/v0/instances', host: 'gateway.localhost' });
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.json<{ error: { code: string } }>().error.code, 'unauthorized');

    const res = await request(a.internalPort, { path: '/v0/instances', host: 'gateway.localhost', headers: signedIn });
    assert.equal(res.status, 200, res.text);
    const { instances } = res.json<{ instances: Instance[] }>();
    assert.equal(instances.length, 2);
    const [first, second] = instances as [Instance, Instance];
    assert.equal(first.answering, true, 'oldest first: A started first and answers');
    assert.equal(second.answering, false);
    for (const instance of instances) {
      assert.match(instance.id, /^instance-/);
      assert.equal(instance.pid, process.pid);
      assert.deepEqual(instance.services, ['config']);
      assert.match(instance.started_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.match(instance.last_seen, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    }
    assert.ok(second.served_requests >= 7, 'B published its requests');

    const rows = await statsOf(a);
    assert.equal(rows[0]!.start_timestamp, first.started_at, 'the longest-running live instance');

    const status = await request(a.internalPort, { path: '/v0/status', host: 'gateway.localhost', headers: signedIn });
    const statusRows = status.json<{ id: string; name: string; host: string; status: number; statusText: string }[]>();
    const instanceRows = statusRows.filter((r) => r.id.startsWith('instance-'));
    assert.deepEqual(
      instanceRows.map((r) => r.id),
      [first.id, second.id],
    );
    assert.deepEqual(instanceRows[0], {
      id: first.id,
      name: `instance ${first.pid}@${first.host}`,
      host: first.host,
      status: 200,
      statusText: '200 OK',
    });
    const anonymousStatus = await request(a.publicPort, { path: '/v0/status', host: 'gateway.localhost' });
    assert.ok(
      !anonymousStatus.json<{ id: string }[]>().some((r) => r.id.startsWith('instance-')),
      'machine host names only for signed-in callers',
    );
  });

  it('drops a closed instance from the sum and the list at once', async () => {
    const before = served(await statsOf(a), 'config.localhost');
    assert.equal(before, 12);
    await b!.close();
    b = null;
    const rows = await statsOf(a);
    assert.equal(served(rows, 'config.localhost'), 7, "only A's own requests are left");
    assert.equal(served(rows, '-noroute-'), 0);
    const { instances } = (
      await request(a.internalPort, { path: '/v0/instances', host: 'gateway.localhost', headers: signedIn })
    ).json<{ instances: Instance[] }>();
    assert.equal(instances.length, 1);
    assert.equal(instances[0]!.answering, true);
  });
});
