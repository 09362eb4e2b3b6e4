import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { hash } from '@node-rs/bcrypt';
import {
  CredentialChecker,
  type CredentialCheckerOptions,
  type RevocationFeed,
  type StoredCredential,
} from '../../src/core/credentials.ts';

const TOPIC = 'test.keys.revoked';

/**
 * An in-memory feed: publish delivers synchronously to this process's subscribers. As a
 * cross-instance feed, messages `sent` by other instances wait until a fence delivers them (or
 * the fence fails, when `fenceFails`), as PostgreSQL notifications do.
 */
class FakeFeed implements RevocationFeed {
  readonly handlers = new Map<string, Set<(message: string) => void>>();
  readonly resyncs = new Set<() => void>();
  readonly published: { topic: string; message: string }[] = [];
  readonly inTransit: { topic: string; message: string }[] = [];
  fences = 0;
  fenceFails = false;

  constructor(readonly crossInstance = false) {}

  /** A message another instance published, not yet delivered here. */
  sent(topic: string, message: string): void {
    this.inTransit.push({ topic, message });
  }

  async fence(): Promise<void> {
    this.fences++;
    await new Promise((resolve) => setImmediate(resolve));
    if (this.fenceFails) throw new Error('reconnecting');
    for (const { topic, message } of this.inTransit.splice(0)) this.deliver(topic, message);
  }

  subscribe(topic: string, handler: (message: string) => void): () => void {
    let set = this.handlers.get(topic);
    if (!set) this.handlers.set(topic, (set = new Set()));
    set.add(handler);
    return () => set.delete(handler);
  }

  onResync(handler: () => void): () => void {
    this.resyncs.add(handler);
    return () => this.resyncs.delete(handler);
  }

  async publish(topic: string, message: string): Promise<void> {
    this.published.push({ topic, message });
    this.deliver(topic, message);
  }

  deliver(topic: string, message: string): void {
    for (const handler of this.handlers.get(topic) ?? []) handler(message);
  }

  resync(): void {
    for (const handler of this.resyncs) handler();
  }

  get subscriptions(): number {
    let count = this.resyncs.size;
    for (const set of this.handlers.values()) count += set.size;
    return count;
  }
}

interface KeyValue {
  ownerId: string;
}

interface Pair {
  key: string;
  secret: string;
}

/** A store of keys with real (cost 4) bcrypt hashes, counting lookups, with a hook inside each lookup. */
class Keys {
  readonly rows = new Map<string, StoredCredential<KeyValue>>();
  lookups = 0;
  duringLookup: ((key: string) => void) | undefined;

  async add(ownerId: string): Promise<Pair> {
    const pair = { key: randomUUID(), secret: randomUUID() };
    this.rows.set(pair.key, { secretHash: await hash(pair.secret, 4), value: { ownerId } });
    return pair;
  }

  lookup = async (key: string): Promise<StoredCredential<KeyValue> | undefined> => {
    this.lookups++;
    await new Promise((resolve) => setImmediate(resolve));
    this.duringLookup?.(key);
    return this.rows.get(key);
  };
}

function checker(
  feed: FakeFeed,
  keys: Keys,
  options: Partial<CredentialCheckerOptions<KeyValue, KeyValue>> = {},
): CredentialChecker<KeyValue> {
  return new CredentialChecker<KeyValue>(feed, {
    lookup: keys.lookup,
    ttlMs: 60_000,
    maxEntries: 100,
    topic: TOPIC,
    selectors: { owner: (value) => value.ownerId },
    ...options,
  });
}

async function ok(checks: CredentialChecker<KeyValue>, pair: Pair): Promise<KeyValue> {
  const check = await checks.check(pair.key, pair.secret);
  assert.equal(check.status, 'ok');
  return (check as { value: KeyValue }).value;
}

describe('CredentialChecker', () => {
  test('a success is cached under a hash of key and secret: a hit costs no lookup and no bcrypt', async () => {
    const feed = new FakeFeed();
    const keys = new Keys();
    const pair = await keys.add('alice');
    const checks = checker(feed, keys);
    try {
      const pairHash = CredentialChecker.pairHash(pair.key, pair.secret);
      assert.ok(!pairHash.includes(pair.secret));
      assert.equal(checks.cached(pairHash), undefined);
      assert.deepEqual(await ok(checks, pair), { ownerId: 'alice' });
      assert.equal(checks.verifications, 1);
      assert.deepEqual(checks.cached(pairHash), { ownerId: 'alice' }, 'synchronously available');
      for (let i = 0; i < 3; i++) assert.deepEqual(await ok(checks, pair), { ownerId: 'alice' });
      assert.equal(checks.verifications, 1);
      assert.equal(keys.lookups, 1);
    } finally {
      checks.close();
    }
  });

  test('failures are never cached: unknown keys, wrong secrets; the precheck refuses without lookup or bcrypt', async () => {
    const feed = new FakeFeed();
    const keys = new Keys();
    const pair = await keys.add('alice');
    const checks = checker(feed, keys, { precheck: (key, secret) => key.length === 36 && secret.length === 36 });
    try {
      const wrong = { key: pair.key, secret: randomUUID() };
      for (let i = 0; i < 2; i++)
        assert.deepEqual(await checks.check(wrong.key, wrong.secret), { status: 'wrong_secret' });
      assert.equal(checks.verifications, 2, 'each wrong secret is compared again');
      assert.equal(checks.cached(CredentialChecker.pairHash(wrong.key, wrong.secret)), undefined);
      assert.deepEqual(await checks.check(randomUUID(), pair.secret), { status: 'unknown' });
      assert.equal(checks.verifications, 2, 'an unknown key costs no bcrypt');
      const lookups = keys.lookups;
      assert.deepEqual(await checks.check(pair.key, 'x'.repeat(5000)), { status: 'malformed' });
      assert.deepEqual(await checks.check('not-a-key', pair.secret), { status: 'malformed' });
      assert.equal(keys.lookups, lookups);
      assert.equal(checks.verifications, 2);
      assert.deepEqual(await ok(checks, pair), { ownerId: 'alice' }, 'the right secret still works');
    } finally {
      checks.close();
    }
  });

  test('concurrent checks of one pair share one verification', async () => {
    const feed = new FakeFeed();
    const keys = new Keys();
    const pair = await keys.add('alice');
    const other = await keys.add('bob');
    const checks = checker(feed, keys);
    try {
      const first = checks.check(pair.key, pair.secret);
      const pending = checks.pending(CredentialChecker.pairHash(pair.key, pair.secret));
      assert.ok(pending, 'the verification under way can be joined');
      const results = await Promise.all([
        first,
        pending,
        ...Array.from({ length: 8 }, () => checks.check(pair.key, pair.secret)),
      ]);
      for (const result of results) assert.deepEqual(result, { status: 'ok', value: { ownerId: 'alice' } });
      assert.equal(checks.verifications, 1);
      assert.equal(keys.lookups, 1);
      assert.equal(
        checks.pending(CredentialChecker.pairHash(pair.key, pair.secret)),
        undefined,
        'nothing under way afterwards',
      );
      // Different pairs do not share.
      await Promise.all([ok(checks, other), checks.check(other.key, randomUUID())]);
      assert.equal(checks.verifications, 3);
    } finally {
      checks.close();
    }
  });

  test('a success is trusted for the TTL only', async () => {
    const feed = new FakeFeed();
    const keys = new Keys();
    const pair = await keys.add('alice');
    const checks = checker(feed, keys, { ttlMs: 150 });
    try {
      await ok(checks, pair);
      await ok(checks, pair);
      assert.equal(checks.verifications, 1);
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(checks.cached(CredentialChecker.pairHash(pair.key, pair.secret)), undefined, 'expired');
      await ok(checks, pair);
      assert.equal(checks.verifications, 2);
    } finally {
      checks.close();
    }
  });

  test('revocations from the feed: by key, by a field of the value, and anything unreadable drops all', async () => {
    const feed = new FakeFeed();
    const keys = new Keys();
    const a1 = await keys.add('alice');
    const a2 = await keys.add('alice');
    const b1 = await keys.add('bob');
    const checks = checker(feed, keys);
    const warm = async () => {
      for (const pair of [a1, a2, b1]) await ok(checks, pair);
    };
    try {
      await warm();
      assert.equal(checks.verifications, 3);
      feed.deliver(TOPIC, JSON.stringify({ key: a1.key }));
      await warm();
      assert.equal(checks.verifications, 4, 'only the revoked key is checked again');
      feed.deliver(TOPIC, JSON.stringify({ owner: 'carol' }));
      await warm();
      assert.equal(checks.verifications, 4, 'nothing of another owner');
      feed.deliver(TOPIC, JSON.stringify({ owner: 'alice' }));
      await warm();
      assert.equal(checks.verifications, 6, 'every key whose value names the owner');
      for (const garbage of ['"garbage"', 'not json', 'null', '{}', JSON.stringify({ key: 7 })]) {
        const before: number = checks.verifications;
        feed.deliver(TOPIC, garbage);
        await warm();
        assert.equal(checks.verifications, before + 3, `everything after ${garbage}`);
      }
      feed.deliver('another.topic', JSON.stringify({ key: b1.key }));
      await warm();
      assert.equal(checks.verifications, 21, 'other topics are ignored');
    } finally {
      checks.close();
    }
  });

  test('revoke forgets here at once and publishes for every instance', async () => {
    const feed = new FakeFeed();
    const keys = new Keys();
    const pair = await keys.add('alice');
    const here = checker(feed, keys);
    const there = checker(feed, keys);
    try {
      await ok(here, pair);
      await ok(there, pair);
      await here.revoke({ owner: 'alice' });
      assert.deepEqual(feed.published, [{ topic: TOPIC, message: JSON.stringify({ owner: 'alice' }) }]);
      const pairHash = CredentialChecker.pairHash(pair.key, pair.secret);
      assert.equal(here.cached(pairHash), undefined);
      assert.equal(there.cached(pairHash), undefined);
    } finally {
      here.close();
      there.close();
    }
  });

  test('where other instances revoke too, a cached success counts only after a fence', async () => {
    const feed = new FakeFeed(true);
    const keys = new Keys();
    const alice = await keys.add('alice');
    const bob = await keys.add('bob');
    const checks = checker(feed, keys);
    try {
      const aliceHash = CredentialChecker.pairHash(alice.key, alice.secret);
      await ok(checks, alice);
      await ok(checks, bob);
      assert.equal(checks.verifications, 2);
      assert.equal(checks.cached(aliceHash), undefined, 'never trusted without a fence');
      assert.deepEqual(await checks.confirmed(aliceHash), { ownerId: 'alice' });
      assert.equal(feed.fences, 1);
      assert.deepEqual(await ok(checks, alice), { ownerId: 'alice' });
      assert.equal(checks.verifications, 2, 'a confirmed hit costs no bcrypt');

      // Revoked through another instance: the message is still on its way when the next check comes.
      keys.rows.delete(alice.key);
      feed.sent(TOPIC, JSON.stringify({ key: alice.key }));
      assert.equal((await checks.check(alice.key, alice.secret)).status, 'unknown');
      assert.equal(await checks.confirmed(aliceHash), undefined);

      // A fence that cannot be had: the cached success is not used, the key is verified again.
      feed.fenceFails = true;
      assert.deepEqual(await ok(checks, bob), { ownerId: 'bob' });
      assert.equal(checks.verifications, 3);
    } finally {
      checks.close();
    }
  });

  test('a resync drops everything; close unsubscribes', async () => {
    const feed = new FakeFeed();
    const keys = new Keys();
    const pair = await keys.add('alice');
    const checks = checker(feed, keys);
    assert.equal(feed.subscriptions, 2);
    await ok(checks, pair);
    await ok(checks, pair);
    assert.equal(checks.verifications, 1);
    feed.resync();
    await ok(checks, pair);
    assert.equal(checks.verifications, 2);
    checks.close();
    assert.equal(feed.subscriptions, 0);
  });

  test('a check that raced a revocation is not cached (by key, by value, on resync)', async () => {
    const feed = new FakeFeed();
    const keys = new Keys();
    const pair = await keys.add('alice');
    const other = await keys.add('bob');
    const checks = checker(feed, keys);
    const pairHash = CredentialChecker.pairHash(pair.key, pair.secret);
    try {
      for (const revoke of [
        () => feed.deliver(TOPIC, JSON.stringify({ key: pair.key })),
        () => feed.deliver(TOPIC, JSON.stringify({ owner: 'alice' })),
        () => feed.resync(),
      ]) {
        checks.forgetAll();
        keys.duringLookup = (key) => {
          if (key === pair.key) revoke();
        };
        assert.deepEqual(await ok(checks, pair), { ownerId: 'alice' }, 'the check itself still answers');
        assert.equal(checks.cached(pairHash), undefined, 'but is not cached');
        keys.duringLookup = undefined;
        await ok(checks, pair);
        assert.deepEqual(checks.cached(pairHash), { ownerId: 'alice' }, 'the next check is');
      }
      // A revocation of another key does not spoil the check.
      checks.forgetAll();
      keys.duringLookup = (key) => {
        if (key === pair.key) feed.deliver(TOPIC, JSON.stringify({ key: other.key }));
      };
      await ok(checks, pair);
      assert.deepEqual(checks.cached(pairHash), { ownerId: 'alice' });
    } finally {
      checks.close();
    }
  });

  test('a resolved value is built after bcrypt accepts the secret, and cached', async () => {
    const feed = new FakeFeed();
    const keys = new Keys();
    const pair = await keys.add('alice');
    let resolved = 0;
    const checks = new CredentialChecker<string, KeyValue>(feed, {
      lookup: keys.lookup,
      resolve: async (stored) => {
        resolved++;
        return `user:${stored.ownerId}`;
      },
      ttlMs: 60_000,
      maxEntries: 10,
      topic: TOPIC,
    });
    try {
      assert.deepEqual(await checks.check(pair.key, randomUUID()), { status: 'wrong_secret' });
      assert.equal(resolved, 0);
      assert.deepEqual(await checks.check(pair.key, pair.secret), { status: 'ok', value: 'user:alice' });
      assert.deepEqual(await checks.check(pair.key, pair.secret), { status: 'ok', value: 'user:alice' });
      assert.equal(resolved, 1);
    } finally {
      checks.close();
    }
  });

  test('the cache is bounded: the oldest success goes first', async () => {
    const feed = new FakeFeed();
    const keys = new Keys();
    const pairs = await Promise.all(Array.from({ length: 4 }, (_, i) => keys.add(`owner-${i}`)));
    const checks = checker(feed, keys, { maxEntries: 3 });
    const cached = (pair: Pair) => checks.cached(CredentialChecker.pairHash(pair.key, pair.secret)) !== undefined;
    try {
      for (const pair of pairs) await ok(checks, pair);
      assert.deepEqual(pairs.map(cached), [false, true, true, true]);
      await ok(checks, pairs[0]!);
      assert.equal(checks.verifications, 5, 'the evicted pair is verified again');
      assert.deepEqual(pairs.map(cached), [true, false, true, true]);
      // Key revocations still find what is left after evictions.
      feed.deliver(TOPIC, JSON.stringify({ key: pairs[2]!.key }));
      assert.deepEqual(pairs.map(cached), [true, false, false, true]);
    } finally {
      checks.close();
    }
  });
});
