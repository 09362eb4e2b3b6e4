import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startScheduler, type SchedulerHarness } from './helpers.ts';

describe('scheduler: concurrent reservers', () => {
  let h: SchedulerHarness;
  before(async () => {
    h = await startScheduler();
  });
  after(async () => {
    await h.close();
  });

  it('50 reservers over 1,000 tasks: no task is leased twice and every task is delivered', async () => {
    await h.createScheduler('many');
    const TASKS = 1000;
    for (let i = 0; i < TASKS; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, j) => h.enqueue('many', { id: `t${i + j}`, payload: i + j })));
    }
    const seen = new Map<string, string>();
    let duplicates = 0;
    const worker = async () => {
      for (;;) {
        const res = await h.call('POST', '/schedulers/many/tasks/reserve', { worktime: '20s' });
        assert.equal(res.statusCode, 200, res.body);
        const { id, lease_id } = res.json();
        if (id.startsWith('stop-')) return;
        if (seen.has(id)) duplicates++;
        seen.set(id, lease_id);
        // Leases are held (no acknowledge): a live lease must never be handed out again.
        if (seen.size === TASKS) {
          await Promise.all(Array.from({ length: 50 }, (_, k) => h.enqueue('many', { id: `stop-${k}` })));
        }
      }
    };
    await Promise.all(Array.from({ length: 50 }, worker));
    assert.equal(duplicates, 0);
    assert.equal(seen.size, TASKS);
    const health = (await h.call('GET', '/schedulers/many/health')).json();
    assert.deepEqual([health.scheduled, health.inflight], [0, TASKS + 50]);
    // Acknowledging under each lease empties the scheduler.
    const entries = [...seen];
    for (let i = 0; i < entries.length; i += 100) {
      const results = await Promise.all(
        entries
          .slice(i, i + 100)
          .map(([id, lease]) => h.call('DELETE', `/schedulers/many/tasks/${id}?lease_id=${lease}`)),
      );
      for (const r of results) assert.equal(r.statusCode, 204);
    }
    assert.equal((await h.call('GET', '/schedulers/many/health')).json().inflight, 50);
  });

  it('reserve + acknowledge cycles with 16 workers deliver each task once', async () => {
    await h.createScheduler('cycles');
    await Promise.all(Array.from({ length: 300 }, (_, i) => h.enqueue('cycles', { id: `c${i}` })));
    const delivered: string[] = [];
    const worker = async () => {
      for (;;) {
        // Long enough that no lease runs out before its acknowledge on a loaded machine; each worker's
        // last reserve waits this long for its 204.
        const res = await h.call('POST', '/schedulers/cycles/tasks/reserve', { worktime: '2s' });
        if (res.statusCode === 204) return;
        const { id, lease_id } = res.json();
        delivered.push(id);
        assert.equal((await h.call('DELETE', `/schedulers/cycles/tasks/${id}?lease_id=${lease_id}`)).statusCode, 204);
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    assert.equal(delivered.length, 300);
    assert.equal(new Set(delivered).size, 300);
  });
});
