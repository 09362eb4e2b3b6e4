import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase, testDialect, type TestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/http.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';

// Two `stratus serve` processes on one PostgreSQL schema: /v0/stats on either is the platform's
// sum, and a process that dies without closing leaves it after INSTANCE_TIMEOUT (src/gateway/README.md).
const skip = testDialect !== 'postgres' && 'processes share a platform only on PostgreSQL (STRATUS_TEST_DB=postgres)';
const TIMEOUT_SECONDS = 2;
const FLUSH_SECONDS = 0.3;

interface Row {
  host: string;
  served_requests: number;
}
const served = (rows: Row[], host: string) => rows.find((r) => r.host === host)?.served_requests ?? 0;

describe('/v0/stats across two processes', { skip }, () => {
  let database: TestDatabase;
  let a: ServedProcess;
  let b: ServedProcess;

  const stats = async (process: ServedProcess) =>
    (await request(process.publicPort, { path: '/v0/stats', host: 'gateway.localhost' })).json<Row[]>();
  const until = async (process: ServedProcess, done: (rows: Row[]) => boolean, timeoutMs: number) => {
    const started = performance.now();
    for (;;) {
      const rows = await stats(process);
      if (done(rows)) return performance.now() - started;
      assert.ok(performance.now() - started < timeoutMs, `not reached in ${timeoutMs} ms: ${JSON.stringify(rows)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };

  before(async () => {
    database = await createTestDatabase();
    const env = {
      DATA_DIR: database.dataDir,
      DATABASE_URL: database.databaseUrl,
      INSTANCE_TIMEOUT: String(TIMEOUT_SECONDS),
      STATS_FLUSH_INTERVAL: String(FLUSH_SECONDS),
    };
    [a, b] = await Promise.all([serve(['--services', 'config'], env), serve(['--services', 'config'], env)]);
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await database?.cleanup();
  });

  it('sums N requests through one process and M through the other', async () => {
    const N = 6;
    const M = 4;
    await Promise.all([
      ...Array.from({ length: N }, (_, i) => request(a.publicPort, { path: `/a/${i}`, host: 'config.localhost' })),
      ...Array.from({ length: M }, (_, i) => request(b.publicPort, { path: `/b/${i}`, host: 'config.localhost' })),
    ]);
    const waited = await until(a, (rows) => served(rows, 'config.localhost') === N + M, 10_000);
    assert.ok(waited < FLUSH_SECONDS * 1000 + 1500, `the sum took ${Math.round(waited)} ms`);
    await until(b, (rows) => served(rows, 'config.localhost') === N + M, 10_000);
  });

  it('keeps a killed process in the sum until INSTANCE_TIMEOUT, then leaves it out', async () => {
    assert.equal(served(await stats(a), 'config.localhost'), 10);
    const killed = performance.now();
    await b.kill();
    assert.equal(served(await stats(a), 'config.localhost'), 10, 'still live: it may only be slow');
    await until(a, (rows) => served(rows, 'config.localhost') === 6, (TIMEOUT_SECONDS + 3) * 1000);
    // Its last heartbeat was at most a third of the timeout before the kill.
    assert.ok(
      performance.now() - killed >= (TIMEOUT_SECONDS * 1000 * 2) / 3 - 100,
      'not before its heartbeat grew old',
    );
  });
});
