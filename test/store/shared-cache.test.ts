import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SizedCache } from '../../src/store/cache.ts';
import { createMemoryNotifier } from '../../src/store/notifier/memory.ts';
import { SharedCache, type ChangeFeed } from '../../src/store/shared-cache.ts';

const entries = () => new SizedCache<string>(1_000, (value) => value.length);

/** A feed whose resync the test triggers, over the in-process notifier (one feed = all instances). */
function sharedFeed(): ChangeFeed & { resync(): void; published: string[] } {
  const notifier = createMemoryNotifier();
  const resyncs = new Set<() => void>();
  const published: string[] = [];
  return {
    published,
    publish: async (topic, message) => {
      published.push(message);
      await notifier.publish(topic, message);
    },
    subscribe: (topic, handler) => notifier.subscribe(topic, handler),
    // Standing for PostgreSQL: other instances publish too.
    crossInstance: true,
    fence: () => notifier.fence(),
    onResync: (handler) => {
      resyncs.add(handler);
      return () => resyncs.delete(handler);
    },
    resync: () => resyncs.forEach((handler) => handler()),
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 10));

/** A load that answers `value` only once `release()` is called: a read kept in flight. */
function heldLoad(value: string): { load: () => Promise<string>; release: () => void } {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  return { load: async () => (await released, value), release };
}

describe('SharedCache', () => {
  it('as the only writer: serves hits without loading and takes written values in place', async () => {
    const cache = new SharedCache(entries(), 'things', true);
    let loads = 0;
    const load = async () => (loads++, 'v1');
    assert.equal(await cache.read('a', load), 'v1');
    assert.equal(await cache.read('a', load), 'v1');
    assert.equal(loads, 1);
    await cache.written('a', 'v2');
    assert.equal(await cache.read('a', load), 'v2');
    await cache.written('a', null);
    assert.equal(await cache.read('a', async () => null), null);
    assert.equal(loads, 1);
  });

  it('needs a feed where other processes write too', () => {
    assert.throws(() => new SharedCache(entries(), 'things', false), /change feed/);
  });

  it('shared: a write on one instance drops the entry on the others, and is published before it settles', async () => {
    const feed = sharedFeed();
    const one = new SharedCache(entries(), 'things', false, feed);
    const two = new SharedCache(entries(), 'things', false, feed);
    let stored = 'v1';
    const load = async () => stored;
    assert.equal(await two.read('a', load), 'v1');
    stored = 'v2';
    await one.written('a', 'v2');
    assert.deepEqual(feed.published, ['a']);
    await settle();
    assert.equal(await two.read('a', load), 'v2');
    // The writer dropped its own entry rather than trusting the value it wrote.
    stored = 'v3';
    assert.equal(await one.read('a', load), 'v3');
    one.close();
    two.close();
  });

  it('shared: a read that raced an announced change is not cached', async () => {
    const feed = sharedFeed();
    const reader = new SharedCache(entries(), 'things', false, feed);
    const writer = new SharedCache(entries(), 'things', false, feed);
    const held = heldLoad('old');
    const raced = reader.read('a', held.load);
    await writer.written('a');
    await settle();
    held.release();
    assert.equal(await raced, 'old');
    assert.equal(await reader.read('a', async () => 'new'), 'new');
    reader.close();
    writer.close();
  });

  it('shared: a read that overlapped changes of other keys only is cached', async () => {
    const feed = sharedFeed();
    const reader = new SharedCache(entries(), 'things', false, feed);
    const writer = new SharedCache(entries(), 'things', false, feed);
    const held = heldLoad('a1');
    const read = reader.read('a', held.load);
    // Another key written through both instances while the read of 'a' is in flight.
    await writer.written('b');
    reader.writing('c');
    await reader.written('c');
    await settle();
    held.release();
    assert.equal(await read, 'a1');
    let loads = 0;
    assert.equal(
      await reader.read('a', async () => (loads++, 'a2')),
      'a1',
      'the overlapping read was cached: a hit now',
    );
    assert.equal(loads, 0);
    // A write of many keys while a read is in flight still counts as a change of that read's key.
    const heldD = heldLoad('d-old');
    const readD = reader.read('d', heldD.load);
    await writer.written(undefined);
    await settle();
    heldD.release();
    assert.equal(await readD, 'd-old');
    assert.equal(await reader.read('d', async () => 'd-new'), 'd-new');
    reader.close();
    writer.close();
  });

  it('shared: a resync clears everything; a write of many keys clears everything everywhere', async () => {
    const feed = sharedFeed();
    const one = new SharedCache(entries(), 'things', false, feed);
    const two = new SharedCache(entries(), 'things', false, feed);
    await one.read('a', async () => 'a1');
    await one.read('b', async () => 'b1');
    feed.resync();
    assert.equal(await one.read('a', async () => 'a2'), 'a2');
    assert.equal(await one.read('b', async () => 'b2'), 'b2');
    await two.written(undefined);
    await settle();
    assert.equal(await one.read('a', async () => 'a3'), 'a3');
    assert.equal(await one.read('b', async () => 'b3'), 'b3');
    one.close();
    two.close();
  });

  it('shared: a hit is served only after a fence, which applies the changes announced before the read', async () => {
    // Another instance's announcements wait "in transit" until a fence delivers them, as
    // PostgreSQL notifications can arrive after the writer's client has read through us.
    const handlers: ((message: string) => void)[] = [];
    const inTransit: string[] = [];
    let fences = 0;
    let fenceFails = false;
    const feed: ChangeFeed = {
      publish: async () => undefined,
      subscribe: (_topic, handler) => {
        handlers.push(handler);
        return () => undefined;
      },
      crossInstance: true,
      fence: async () => {
        fences++;
        if (fenceFails) throw new Error('reconnecting');
        for (const message of inTransit.splice(0)) handlers.forEach((handler) => handler(message));
      },
      onResync: () => () => undefined,
    };
    const cache = new SharedCache(entries(), 'things', false, feed);
    let stored = 'v1';
    let loads = 0;
    const load = async () => (loads++, stored);
    assert.equal(await cache.read('a', load), 'v1');
    assert.equal(await cache.read('a', load), 'v1');
    assert.deepEqual([loads, fences], [1, 1], 'the second read was a hit, after one fence');

    stored = 'v2';
    inTransit.push('a'); // written through another instance, announced, not yet arrived
    assert.equal(await cache.read('a', load), 'v2');
    assert.deepEqual([loads, fences], [2, 2]);

    // While the notifier cannot fence, nothing cached is trusted.
    fenceFails = true;
    stored = 'v3';
    assert.equal(await cache.read('a', load), 'v3');
    assert.equal(loads, 3);
    cache.close();
  });

  it('stops listening once closed', async () => {
    const feed = sharedFeed();
    const closed = new SharedCache(entries(), 'things', false, feed);
    const writer = new SharedCache(entries(), 'things', false, feed);
    await closed.read('a', async () => 'kept');
    closed.close();
    await writer.written('a');
    await settle();
    assert.equal(await closed.read('a', async () => 'fresh'), 'kept');
    writer.close();
  });
});
