import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import pino from 'pino';
import { startPlatform, type RunningPlatform } from '../../../src/platform.ts';
import { all } from '../../../src/store/sql-work.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';
import { request } from '../../helpers/http.ts';
import { testSettings } from '../../helpers/service.ts';
import { openStream } from './helpers.ts';

interface Stats {
  total_bytes_sent: number;
  total_bytes_received: number;
  total_bytes_filtered: number;
  last_regexps: string[];
  concurrent_filters: number;
  concurrent_ingests: number;
  total_filters: number;
  total_ingests: number;
  block: { bytes: number; lines: number; events: number; max_bytes: number };
}

const owner = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'user-shared' } }) };
const host = 'logs.localhost';

// Two platforms running the logs service on one database, as two instances of a scaled-out
// platform: a logger's stats are the sum over both (src/services/logs/README.md: Stats).
describe("a logger's stats over two instances", () => {
  let database: TestDatabase;
  let a: RunningPlatform;
  let b: RunningPlatform | null;
  let loggerId: string;

  const statsVia = async (platform: RunningPlatform, id = loggerId) => {
    const res = await request(platform.internalPort, { path: `/v1/loggers/${id}/stats`, host, headers: owner });
    return { status: res.status, body: res.json<Stats>() };
  };
  const until = async (platform: RunningPlatform, done: (stats: Stats) => boolean): Promise<Stats> => {
    const started = performance.now();
    for (;;) {
      const { body } = await statsVia(platform);
      if (done(body)) return body;
      assert.ok(performance.now() - started < 10_000, `not reached in 10 s: ${JSON.stringify(body)}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  };
  const ingest = (platform: RunningPlatform, body: string) =>
    request(platform.internalPort, {
      method: 'POST',
      path: `/v1/loggers/${loggerId}/ingest`,
      host,
      headers: owner,
      body,
    });

  before(async () => {
    database = await createTestDatabase();
    const settings = testSettings(database, {
      port: 0,
      host: '127.0.0.1',
      internalPort: 0,
      internalHost: '127.0.0.1',
      services: ['logs'],
      statsFlushSeconds: 0.2,
      instanceTimeoutSeconds: 5,
    });
    const silent = pino({ level: 'silent' });
    a = await startPlatform(settings, silent);
    b = await startPlatform(settings, silent);
    const created = await request(a.internalPort, {
      method: 'POST',
      path: '/v1/loggers',
      host,
      headers: owner,
      body: '{"name":"shared"}',
    });
    assert.equal(created.status, 201, created.text);
    loggerId = created.json<{ id: string }>().id;
  });
  after(async () => {
    await b?.close();
    await a?.close();
    await database?.cleanup();
  });

  it('sums ingests and streams of both instances, and merges the recent patterns in time order', async () => {
    assert.equal((await ingest(a, 'x one\n')).status, 200);
    assert.equal((await ingest(a, 'y two\n')).status, 200);
    assert.equal((await ingest(b!, 'x three\n')).status, 200);
    const first = await openStream(a.internalPort, `/v1/loggers/${loggerId}/filter?regex=x`, { ...owner, host });
    await first.ended;
    const second = await openStream(b!.internalPort, `/v1/loggers/${loggerId}/filter?regex=y`, { ...owner, host });
    await second.ended;
    const expected = (maxBytes: number): Stats => ({
      total_bytes_sent: 'x one\nx three\n'.length + 'y two\n'.length,
      total_bytes_received: 'x one\ny two\nx three\n'.length,
      total_bytes_filtered: 2 * 'x one\ny two\nx three\n'.length,
      last_regexps: ['x', 'y'],
      concurrent_filters: 0,
      concurrent_ingests: 0,
      total_filters: 2,
      total_ingests: 3,
      block: { bytes: 'x one\ny two\nx three\n'.length, lines: 3, events: 0, max_bytes: maxBytes },
    });
    // Each instance sees the other's share once it has been flushed: wait for the whole picture
    // on both (a stream's counters can lag its ingest counters by one flush).
    const complete = (s: Stats) => isDeepStrictEqual(s, expected(s.block.max_bytes));
    const stats = await until(a, complete);
    assert.deepEqual(stats, expected(stats.block.max_bytes));
    const fromB = await until(b!, complete);
    assert.deepEqual(fromB, stats, 'both instances answer the same figures');
  });

  it("counts a stream open on the other instance in concurrent_filters, and drops a closed instance's share", async () => {
    const follower = await openStream(b!.internalPort, `/v1/loggers/${loggerId}/filter?regex=z&follow`, {
      ...owner,
      host,
    });
    assert.equal(follower.status, 200);
    const open = await until(a, (s) => s.concurrent_filters === 1);
    assert.deepEqual(open.last_regexps, ['x', 'y', 'z']);
    follower.close();
    await until(a, (s) => s.concurrent_filters === 0);

    // B closes: what it counted leaves the sum with it (live instances only).
    await b!.close();
    b = null;
    const left = (await statsVia(a)).body;
    assert.equal(left.total_ingests, 2, "A's own ingests");
    assert.equal(left.total_filters, 1);
    assert.deepEqual(left.last_regexps, ['x']);
  });

  it('answers 404 for an unknown logger and clears a deleted logger', async () => {
    const unknown = await statsVia(a, 'no-such-logger');
    assert.equal(unknown.status, 404);
    const deleted = await request(a.internalPort, {
      method: 'DELETE',
      path: `/v1/loggers/${loggerId}`,
      host,
      headers: owner,
    });
    assert.equal(deleted.status, 204);
    assert.equal((await statsVia(a)).status, 404);
    const left = await a.store.sql.database.read(() =>
      all('select name from stratus_instance_counters where owner = ? and name = ?', 'logs', loggerId),
    );
    assert.deepEqual(left, [], 'its published counters are gone');
  });
});
