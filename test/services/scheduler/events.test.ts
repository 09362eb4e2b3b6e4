// Change notifications (README: Waking): one message per scheduler per turn; changes that wake no
// reserver (claims, acknowledges) at most once per 50 ms per scheduler, the last one always sent.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { SchedulerEvents } from '../../../src/services/scheduler/events.ts';
import type { Notifier } from '../../../src/store/notifier/types.ts';

/** A notifier that records what is published, with the time. */
function recorder() {
  const published: { at: number; message: { s: string; w: number; d: number } }[] = [];
  const notifier: Notifier = {
    async publish(_topic, message) {
      published.push({ at: performance.now(), message: JSON.parse(message) as { s: string; w: number; d: number } });
    },
    subscribe: () => () => {},
    onResync: () => () => {},
    crossInstance: false,
    async fence() {},
    async close() {},
  };
  return { notifier, published };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('scheduler change notifications', () => {
  it('a turn of changes is one message per scheduler; due and deleted go out at once', async () => {
    const { notifier, published } = recorder();
    const events = new SchedulerEvents(notifier, (error) => assert.fail(String(error)));
    try {
      events.changed('a', { due: true });
      events.changed('a');
      events.changed('b', { deleted: true });
      await turn();
      assert.deepEqual(
        published.map((p) => p.message),
        [
          { s: 'a', w: 1, d: 0 },
          { s: 'b', w: 0, d: 1 },
        ],
      );
      // Right after, a due change is not held back.
      events.changed('a', { due: true });
      await turn();
      assert.deepEqual(published[2]?.message, { s: 'a', w: 1, d: 0 });
    } finally {
      events.close();
    }
  });

  it('quiet changes: the first at once, then at most one per 50 ms, the last one always', async () => {
    const { notifier, published } = recorder();
    const events = new SchedulerEvents(notifier, (error) => assert.fail(String(error)));
    try {
      const started = performance.now();
      let lastChange = started;
      // A claim or acknowledge every millisecond for 200 ms.
      while (performance.now() - started < 200) {
        lastChange = performance.now();
        events.changed('busy');
        await sleep(1);
      }
      await sleep(80);
      const quiet = published.filter((p) => p.message.s === 'busy');
      assert.ok(quiet.length >= 3 && quiet.length <= 6, `${quiet.length} messages in 200 ms`);
      for (const [i, p] of quiet.entries()) {
        assert.deepEqual(p.message, { s: 'busy', w: 0, d: 0 });
        if (i > 0) assert.ok(p.at - quiet[i - 1]!.at >= 45, `messages ${p.at - quiet[i - 1]!.at} ms apart`);
      }
      // The changes of the last interval were announced after they happened.
      assert.ok(quiet[quiet.length - 1]!.at >= lastChange, 'a message follows the last change');
      // A due change in the middle of a held interval goes out at once, carrying the held ones.
      events.changed('busy');
      events.changed('busy');
      await turn();
      const before = published.length;
      events.changed('busy');
      events.changed('busy', { due: true });
      await turn();
      assert.deepEqual(
        published.slice(before).map((p) => p.message),
        [{ s: 'busy', w: 1, d: 0 }],
      );
      await sleep(80);
      assert.equal(published.length, before + 1, 'nothing left held');
    } finally {
      events.close();
    }
  });
});
