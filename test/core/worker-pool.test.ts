import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { WorkerPool } from '../../src/core/worker-pool.ts';

const DOUBLER = `require('node:worker_threads').parentPort.on('message', (m) => setTimeout(() => require('node:worker_threads').parentPort.postMessage(m * 2), m === 0 ? 1500 : 0));`;

describe('WorkerPool', () => {
  it('ends workers left idle and starts them again on the next job', async () => {
    let started = 0;
    const pool = new WorkerPool(
      () => {
        started++;
        return new Worker(DOUBLER, { eval: true });
      },
      2,
      // Long beside a worker's start on a loaded machine, so both are still there after the jobs.
      1_000,
    );
    try {
      assert.deepEqual(await Promise.all([pool.run<number>(1, [], 5_000), pool.run<number>(2, [], 5_000)]), [2, 4]);
      assert.equal(pool.workerCount, 2);
      await sleep(1_800);
      assert.equal(pool.workerCount, 0);
      assert.equal(await pool.run<number>(3, [], 5_000), 6);
      assert.equal(started, 3);
    } finally {
      await pool.close();
    }
  });

  it('does not end a worker that is running a job, however long', async () => {
    const pool = new WorkerPool(() => new Worker(DOUBLER, { eval: true }), 2, 200);
    try {
      await Promise.all([pool.run<number>(1, [], 5_000), pool.run<number>(2, [], 5_000)]);
      // One worker runs a 1.5 s job while the other goes idle and ends.
      const long = pool.run<number>(0, [], 5_000);
      await sleep(800);
      assert.equal(pool.workerCount, 1);
      assert.equal(await long, 0);
    } finally {
      await pool.close();
    }
  });
});
