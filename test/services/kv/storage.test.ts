import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { KvStorage, prefixUpperBound } from '../../../src/services/kv/storage.ts';
import { dataDirs } from './helpers.ts';

const dirs = dataDirs();
after(() => dirs.cleanup());

describe('kv storage', () => {
  it('trims the replication log to its newest entries, cutting after a key command', async () => {
    const storage = KvStorage.open(join(dirs.make(), 'kv.db'), 'NORMAL');
    try {
      await storage.createCollection('', 'c', 1);
      await Promise.all(Array.from({ length: 1_000 }, (_, i) => storage.set('', 'c', `k${i % 50}`, String(i), 1)));
      assert.equal(storage.logAfter(0, 10_000).length, 1_001);
      assert.equal(storage.resumePoint(0, false), 0, 'a primary resumes from seq 0 while its log is whole');
      const removed = await storage.trimLog(100);
      const left = storage.logAfter(0, 10_000);
      assert.equal(removed + left.length, 1_001);
      assert.ok(left.length >= 100 && left.length <= 101, `${left.length} entries left`);
      assert.equal(storage.logFloor, 1_000 - left.length);
      // A child at the floor resumes with everything kept; one below it needs a baseline.
      const atFloor = storage.resumePoint(storage.logFloor, false);
      assert.ok(atFloor !== null);
      assert.deepEqual(storage.logAfter(atFloor, 10_000), left);
      assert.equal(left[0]!.id, atFloor + 1, 'no gap between the resume point and the first entry kept');
      assert.equal(storage.resumePoint(storage.logFloor - 1, false), null);
      assert.equal(storage.resumePoint(storage.lastSeq + 1, false), null, 'a child ahead of its parent takes a baseline');
      const at = storage.resumePoint(990, false);
      assert.ok(at !== null);
      assert.equal(storage.logAfter(at, 100).length, 10);
      // State is untouched by trimming: 50 keys, each at its last write.
      assert.equal(storage.totals().keys, 50);
      assert.equal(storage.get('', 'c', 'k49')?.value, '999');
    } finally {
      await storage.close();
    }
  });

  it('reopens with every write, seq and version in place', async () => {
    const file = join(dirs.make(), 'kv.db');
    let storage = KvStorage.open(file, 'FULL');
    await storage.createCollection('p', 'c', 1);
    await storage.set('p', 'c', 'a', '{"x":1}', 10);
    await storage.delete('p', 'c', 'a', 11);
    await storage.close();
    storage = KvStorage.open(file, 'FULL');
    try {
      assert.equal(storage.lastSeq, 2);
      const again = await storage.set('p', 'c', 'a', '2', 12);
      assert.ok(typeof again === 'object');
      assert.equal(again.seq, 3);
      assert.equal(again.version, 3);
    } finally {
      await storage.close();
    }
  });

  it('bounds a prefix by the next code point', () => {
    assert.equal(prefixUpperBound('ab'), 'ac');
    assert.equal(prefixUpperBound('a\uD7FF'), 'a\uE000');
    assert.equal(prefixUpperBound('a\u{10FFFF}'), 'b');
    assert.equal(prefixUpperBound(''), null);
  });
});
