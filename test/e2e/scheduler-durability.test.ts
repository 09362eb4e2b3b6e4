import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/http.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';

const HOST = 'scheduler.localhost';
const KEY = 'e2e-scheduler-key';
const auth = { 'x-api-key': KEY };

// Deadlines on every wait below, so that a server that stops answering, acknowledging or paging
// fails the test with what was missing rather than running until the runner's per-test timeout.
const ACKNOWLEDGED = 400;
const ACKNOWLEDGE_WITHIN_MS = 60_000;
const PRODUCERS_STOP_WITHIN_MS = 30_000;
const LIST_WITHIN_MS = 60_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function allTaskIds(port: number, scheduler: string): Promise<Set<string>> {
  const ids = new Set<string>();
  const deadline = Date.now() + LIST_WITHIN_MS;
  for (let page = 1; ; page++) {
    const res = await request(port, {
      path: `/schedulers/${scheduler}/tasks?scheduled_per_page=500&scheduled_page=${page}`,
      host: HOST,
    });
    assert.equal(res.status, 200, res.text);
    const body = res.json<{ scheduled: { id: string }[]; scheduled_meta: { total_pages: number } }>();
    const totalPages = body.scheduled_meta.total_pages;
    assert.ok(
      Number.isSafeInteger(totalPages),
      `page ${page} of ${scheduler}'s tasks has total_pages ${String(totalPages)}`,
    );
    for (const t of body.scheduled) ids.add(t.id);
    if (page >= totalPages) return ids;
    if (Date.now() > deadline) {
      assert.fail(
        `listing ${scheduler}'s tasks took over ${LIST_WITHIN_MS / 1000} s: pages ${page + 1} to ${totalPages} still unread (${ids.size} ids read)`,
      );
    }
  }
}

describe('scheduler durability and routing through `stratus serve`', () => {
  let database: TestDatabase;
  let env: Record<string, string | undefined>;
  let server: ServedProcess;

  before(async () => {
    database = await createTestDatabase();
    env = { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl, SCHEDULER_API_KEYS: `${KEY},other` };
    server = await serve(['--services', 'scheduler'], env);
  });

  after(async () => {
    await server.stop();
    await database.cleanup();
  });

  it('is reachable at scheduler.<domain> and at /schedulers on api.<domain> with either key header', async () => {
    const created = await request(server.publicPort, {
      method: 'POST',
      path: '/schedulers',
      host: HOST,
      headers: auth,
      body: '{"id":"routed","display_name":"R"}',
    });
    assert.equal(created.status, 201, created.text);
    const viaApi = await request(server.publicPort, {
      method: 'POST',
      path: '/schedulers/routed/tasks',
      host: 'api.localhost',
      headers: { authorization: `Bearer ${KEY}` },
      body: '{"id":"t1"}',
    });
    assert.equal(viaApi.status, 202, viaApi.text);
    const anonymous = await request(server.publicPort, {
      method: 'POST',
      path: '/schedulers/routed/tasks',
      host: 'api.localhost',
      body: '{}',
    });
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.json<{ error: { code: string } }>().error.code, 'unauthorized');
    const listed = await request(server.publicPort, { path: '/schedulers/routed/tasks', host: 'api.localhost' });
    assert.equal(listed.status, 200);
    const doc = await request(server.publicPort, { path: '/openapi.json', host: HOST });
    assert.equal(doc.json<{ info: { title: string } }>().info.title, 'Scheduler API');
  });

  it('keeps every acknowledged enqueue and every lease across kill -9', async () => {
    const created = await request(server.internalPort, {
      method: 'POST',
      path: '/schedulers',
      host: HOST,
      headers: auth,
      body: '{"id":"durable","display_name":"D"}',
    });
    assert.equal(created.status, 201);
    await request(server.internalPort, {
      method: 'POST',
      path: '/schedulers/durable/tasks',
      host: HOST,
      headers: auth,
      body: '{"id":"leased","payload":{"x":1}}',
    });
    const lease = await request(server.internalPort, {
      method: 'POST',
      path: '/schedulers/durable/tasks/reserve',
      host: HOST,
      headers: auth,
      body: '{"worktime":"1h"}',
    });
    assert.equal(lease.status, 200);

    const acknowledged: string[] = [];
    let stop = false;
    let running = 0;
    let lastRefusal = 'none';
    const producer = async (w: number) => {
      running++;
      try {
        for (let i = 0; !stop; i++) {
          const id = `w${w}-${i}`;
          try {
            const res = await request(server.internalPort, {
              method: 'POST',
              path: '/schedulers/durable/tasks',
              host: HOST,
              headers: auth,
              body: JSON.stringify({ id, payload: i }),
            });
            if (res.status === 202) acknowledged.push(id);
            else lastRefusal = `${res.status} ${res.text.slice(0, 200)}`;
          } catch (error) {
            lastRefusal = String(error);
            return; // the server died under this request: it was never acknowledged
          }
        }
      } finally {
        running--;
      }
    };
    const producers = Array.from({ length: 8 }, (_, w) => producer(w));
    try {
      const deadline = Date.now() + ACKNOWLEDGE_WITHIN_MS;
      while (acknowledged.length < ACKNOWLEDGED) {
        if (running === 0 || Date.now() > deadline) {
          assert.fail(
            `${ACKNOWLEDGED - acknowledged.length} of ${ACKNOWLEDGED} enqueues still unacknowledged ` +
              `${running === 0 ? 'when every producer had stopped' : `after ${ACKNOWLEDGE_WITHIN_MS / 1000} s`} ` +
              `(${running} of ${producers.length} producers running; last refusal: ${lastRefusal})`,
          );
        }
        await sleep(5);
      }
      await server.kill();
    } finally {
      stop = true;
    }
    const stopDeadline = Date.now() + PRODUCERS_STOP_WITHIN_MS;
    while (running > 0) {
      if (Date.now() > stopDeadline)
        assert.fail(
          `${running} of ${producers.length} producers still running ${PRODUCERS_STOP_WITHIN_MS / 1000} s after the kill`,
        );
      await sleep(5);
    }
    await Promise.all(producers);

    server = await serve(['--services', 'scheduler'], env);
    const ids = await allTaskIds(server.internalPort, 'durable');
    const missing = acknowledged.filter((id) => !ids.has(id));
    assert.deepEqual(missing, []);
    const health = await request(server.internalPort, { path: '/schedulers/durable/health', host: HOST });
    assert.equal(health.json<{ inflight: number }>().inflight, 1);
    const list = await request(server.internalPort, { path: '/schedulers/durable/tasks', host: HOST });
    assert.deepEqual(
      list.json<{ inflight: { id: string }[] }>().inflight.map((t) => t.id),
      ['leased'],
    );
  });
});
