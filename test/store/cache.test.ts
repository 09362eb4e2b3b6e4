import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TextCache } from '../../src/store/cache.ts';

describe('TextCache', () => {
  it('returns what was set, replaces and deletes', () => {
    const cache = new TextCache(100);
    cache.set('a', 'one');
    assert.equal(cache.get('a'), 'one');
    cache.set('a', 'uno!');
    assert.equal(cache.get('a'), 'uno!');
    assert.equal(cache.chars, 4);
    cache.delete('a');
    assert.equal(cache.get('a'), undefined);
    assert.equal(cache.chars, 0);
  });

  it('stays within its size, dropping the oldest entries not read since', () => {
    const cache = new TextCache(10);
    cache.set('a', 'aaaa');
    cache.set('b', 'bbbb');
    assert.equal(cache.get('a'), 'aaaa'); // a gets a second chance
    cache.set('c', 'cccc'); // 12 > 10: b (oldest unread) goes
    assert.equal(cache.get('b'), undefined);
    assert.equal(cache.get('a'), 'aaaa');
    assert.equal(cache.get('c'), 'cccc');
    assert.ok(cache.chars <= 10);
    cache.set('d', 'dddd');
    assert.ok(cache.chars <= 10);
    assert.equal(cache.count, 2);
    assert.equal(cache.get('d'), 'dddd', 'the newest entry always stays');
  });

  it('refuses a value larger than the whole cache', () => {
    const cache = new TextCache(3);
    cache.set('big', 'abcd');
    assert.equal(cache.get('big'), undefined);
    assert.equal(cache.chars, 0);
  });
});
