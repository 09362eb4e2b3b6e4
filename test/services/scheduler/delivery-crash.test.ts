import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';
import { request } from '../../helpers/http.ts';
import { serve, type ServedProcess } from '../../helpers/serve.ts';
import { within } from '../../helpers/waiting.ts';

// Issue 23: a delivery whose instance is killed (kill -9) mid-delivery is delivered again, by the
// next instance on the same data, once its lease (SCHEDULER_DELIVERY_LEASE) has run out.

describe('scheduler delivery across a kill -9', () => {
  let database: TestDatabase | undefined;
  let server: ServedProcess | undefined;
  let hook: http.Server | undefined;
  after(async () => {
    await server?.kill();
    await database?.cleanup();
    hook?.closeAllConnections();
    await new Promise<void>((resolve) => (hook ? hook.close(() => resolve()) : resolve()));
  });

  it('redelivers the task the killed instance was delivering, and the answer acknowledges it', async () => {
    const attempts: string[] = [];
    let firstSeen: () => void = () => {};
    const first = new Promise<void>((resolve) => (firstSeen = resolve));
    let acknowledged: () => void = () => {};
    const second = new Promise<void>((resolve) => (acknowledged = resolve));
    // The first delivery never gets an answer: its instance dies while it waits.
    hook = http.createServer((req, res) => {
      attempts.push(String(req.headers['stratus-attempt']));
      req.resume();
      if (attempts.length === 1) firstSeen();
      else {
        res.end('ok');
        acknowledged();
      }
    });
    await new Promise<void>((resolve) => hook!.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/in`;

    database = await createTestDatabase();
    const env = {
      DATA_DIR: database.dataDir,
      DATABASE_URL: database.databaseUrl,
      SCHEDULER_API_KEYS: 'crash-key',
      LAMBDA_EGRESS_ALLOW: '127.0.0.1',
      SCHEDULER_DELIVERY_LEASE: '2',
    };
    const call = (method: string, path: string, body?: unknown) =>
      request(server!.internalPort, {
        method,
        path,
        host: 'scheduler.localhost',
        headers: { 'x-api-key': 'crash-key', 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });

    server = await serve([], env);
    const created = await call('POST', '/schedulers', {
      id: 'crashy',
      display_name: 'Crashy',
      target: { url, secret: 'crash-test-secret-0001' },
    });
    assert.equal(created.status, 201, created.text);
    assert.equal((await call('POST', '/schedulers/crashy/tasks', { id: 'c1', payload: { n: 1 } })).status, 202);
    await within(first, 'the first delivery');
    await server.kill();

    server = await serve([], env);
    await within(second, 'the redelivery after the lease ran out', 30_000);
    assert.deepEqual(attempts, ['1', '2']);
    // The answer acknowledged it: no task is left, none is dead.
    const started = Date.now();
    for (;;) {
      const health = (await call('GET', '/schedulers/crashy/health')).json<{ scheduled: number; inflight: number }>();
      if (health.scheduled + health.inflight === 0) break;
      if (Date.now() - started > 10_000) assert.fail(`the task is still there: ${JSON.stringify(health)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal((await call('GET', '/schedulers/crashy/dead')).json<{ meta: { total: number } }>().meta.total, 0);
  });
});
