// The find answer cache (repository/answers.ts) on its own, with an embedded store's rules (sole writer).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FindAnswers } from '../../../src/services/docdb/repository/answers.ts';
import type { SqlDatabase } from '../../../src/store/sql/types.ts';
import type { ChangeFeed } from '../../../src/store/shared-cache.ts';

function cache(): { answers: FindAnswers; release(): void } {
  // Only `soleWriter` is read (the feed is not used by a sole writer); the object keys the shared cache.
  const sql = { soleWriter: true } as SqlDatabase;
  return { answers: FindAnswers.of(sql, {} as ChangeFeed), release: () => FindAnswers.release(sql) };
}

describe('FindAnswers', () => {
  it('keeps an answer until its collection changes, and only that collection', async () => {
    const { answers, release } = cache();
    const a = await answers.answers('db/a');
    const b = await answers.answers('db/b');
    answers.remember(a, '{}', 'x\n');
    answers.remember(b, '{}', 'y\n');
    assert.equal((await answers.answers('db/a')).byQuery.get('{}'), 'x\n');
    assert.equal(await answers.changing('db/a', () => Promise.resolve(7)), 7);
    assert.equal((await answers.answers('db/a')).byQuery.get('{}'), undefined);
    assert.equal((await answers.answers('db/b')).byQuery.get('{}'), 'y\n');
    release();
  });

  it('an answer read before a change is not kept after it, even when the write fails', async () => {
    const { answers, release } = cache();
    const before = await answers.answers('db/a');
    await assert.rejects(answers.changing('db/a', () => Promise.reject(new Error('no'))));
    answers.remember(before, '{}', 'old\n');
    assert.equal((await answers.answers('db/a')).byQuery.get('{}'), undefined);
    // During the write too: what was read then may predate its commit.
    let during: Awaited<ReturnType<FindAnswers['answers']>> | undefined;
    await answers.changing('db/a', async () => {
      during = await answers.answers('db/a');
    });
    answers.remember(during!, '{}', 'old\n');
    assert.equal((await answers.answers('db/a')).byQuery.get('{}'), undefined);
    release();
  });

  it('does not keep long answers or long queries', async () => {
    const { answers, release } = cache();
    const a = await answers.answers('db/a');
    answers.remember(a, 'long answer', 'x'.repeat(64 * 1024 + 1));
    answers.remember(a, 'q'.repeat(4 * 1024 + 1), 'x\n');
    answers.remember(a, 'short', 'x'.repeat(64 * 1024));
    assert.deepEqual([...(await answers.answers('db/a')).byQuery.keys()], ['short']);
    release();
  });

  it('past its budget it starts again empty', async () => {
    const { answers, release } = cache();
    const text = 'x'.repeat(60 * 1024);
    // 16 MiB hold about 270 such answers: the 300th finds the cache emptied on its way.
    for (let i = 0; i < 300; i++) answers.remember(await answers.answers(`db/c${i}`), '{}', text);
    assert.equal((await answers.answers('db/c0')).byQuery.get('{}'), undefined);
    assert.equal((await answers.answers('db/c299')).byQuery.get('{}'), text);
    release();
  });
});
