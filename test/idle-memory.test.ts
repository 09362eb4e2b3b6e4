import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import { releaseMemoryWhenIdle } from '../src/idle-memory.ts';

const MiB = 1024 ** 2;

describe('releaseMemoryWhenIdle', () => {
  it('collects when idle once the RSS grew by the threshold since the last release (or start), never while busy', async () => {
    let rss = 100 * MiB;
    let busy = 0.5;
    let collections = 0;
    const stop = releaseMemoryWhenIdle({
      intervalMs: 10,
      growthBytes: 32 * MiB,
      rss: () => rss,
      utilization: () => busy,
      collect: () => {
        collections++;
        rss = 110 * MiB;
      },
    });
    try {
      await sleep(50);
      assert.equal(collections, 0, 'busy: no pause under load');
      busy = 0;
      await sleep(50);
      assert.equal(collections, 1, 'idle: the first look releases what start-up left');
      await sleep(50);
      assert.equal(collections, 1, 'what remained after it is the new baseline');
      rss = 130 * MiB;
      await sleep(50);
      assert.equal(collections, 1, 'grown less than the threshold');
      rss = 150 * MiB;
      await sleep(50);
      assert.equal(collections, 2, 'grown by the threshold since the release');
    } finally {
      stop();
    }
  });

  it("gives back the pages of a heap that shrank (V8's pool) with the real collection", async () => {
    const before = v8.getHeapStatistics().total_heap_size;
    let keep: unknown[] | null = [];
    for (let i = 0; i < 1_000_000; i++) keep.push({ n: i, s: `x${i}` });
    const grownBy = v8.getHeapStatistics().total_heap_size - before;
    const rss = process.memoryUsage.rss();
    keep = null;
    const stop = releaseMemoryWhenIdle({ intervalMs: 20, growthBytes: 0, utilization: () => 0 });
    try {
      await sleep(200);
    } finally {
      stop();
    }
    assert.ok(keep === null);
    // A plain full collection leaves the freed pages resident in V8's pool; this one returns them.
    const freed = rss - process.memoryUsage.rss();
    assert.ok(
      freed > grownBy / 2,
      `${Math.round(freed / MiB)} MiB of RSS freed, the heap had grown ${Math.round(grownBy / MiB)} MiB`,
    );
    // The process's own `gc` stays unexposed.
    assert.equal(typeof (globalThis as { gc?: unknown }).gc, 'undefined');
  });
});
