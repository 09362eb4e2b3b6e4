// Issue 17: filters are bounded in size, and documents that are large (or costly to test) are
// read and tested apart, without changing any answer.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MAX_FILTER_VALUES, MAX_OPERATOR_ELEMENTS } from '../../../src/services/docdb/query/filter.ts';
import { storeDigest } from '../../helpers/platform.ts';
import { createIndex, errorOf, find, ids, linesOf, post, seed, startEnv, type Env } from './fixtures.ts';

let env: Env;
before(async () => {
  env = await startEnv();
  await seed(
    env,
    'people',
    Array.from({ length: 50 }, (_, i) => ({ id: `p${i}`, n: i, name: `user ${i}`, tags: ['all', `t${i % 5}`] })),
  );
});
after(async () => {
  await env.service.close();
});

const range = (length: number, from = 0) => Array.from({ length }, (_, i) => from + i);

describe('filter caps: 400 invalid_filter, nothing read or changed', () => {
  it(`an operator array over ${MAX_OPERATOR_ELEMENTS} elements is refused, naming the operator`, async () => {
    const before = await storeDigest(env.service.store.sql);
    for (const operator of ['$in', '$nin']) {
      const filter = { n: { [operator]: range(MAX_OPERATOR_ELEMENTS + 1) } };
      for (const action of ['find', 'patch', 'remove']) {
        const body = action === 'patch' ? { filter, patch: { x: 1 }, limit: -1 } : { filter, limit: -1 };
        const message = errorOf(await post(env, `people:${action}`, body), 400, 'invalid_filter');
        assert.equal(
          message,
          `operator '${operator}' has ${MAX_OPERATOR_ELEMENTS + 1} elements; at most ${MAX_OPERATOR_ELEMENTS} are allowed`,
        );
      }
    }
    for (const operator of ['$or', '$and']) {
      const filter = { [operator]: range(MAX_OPERATOR_ELEMENTS + 1).map((n) => ({ n })) };
      assert.match(
        errorOf(await post(env, 'people:remove', { filter, limit: -1 }), 400, 'invalid_filter'),
        new RegExp(`'\\${operator}' has`),
      );
    }
    // The 150,000-element $in of the report.
    errorOf(
      await post(env, 'people:find', { filter: { n: { $in: range(150_000) } }, limit: -1 }),
      400,
      'invalid_filter',
    );
    assert.deepEqual(await storeDigest(env.service.store.sql), before);
  });

  it(`a filter of more than ${MAX_FILTER_VALUES} values is refused`, async () => {
    const before = await storeDigest(env.service.store.sql);
    const half = MAX_FILTER_VALUES / 2;
    // Two arrays within the operator cap, too many values together.
    const filter = { $or: [{ n: { $in: range(half) } }, { n: { $in: range(half, 1000) } }] };
    assert.match(
      errorOf(await post(env, 'people:patch', { filter, patch: { x: 1 }, limit: -1 }), 400, 'invalid_filter'),
      /too large/,
    );
    assert.deepEqual(await storeDigest(env.service.store.sql), before);
  });

  it('at the caps, filters are accepted and answer as usual', async () => {
    const wanted = [3, 17, 42];
    const big = [...range(MAX_OPERATOR_ELEMENTS - wanted.length, 1000), ...wanted];
    assert.deepEqual(ids(await find(env, 'people', { filter: { n: { $in: big } }, limit: -1 })), ['p3', 'p17', 'p42']);
    assert.equal((await find(env, 'people', { filter: { n: { $nin: big } }, limit: -1 })).length, 47);
    assert.deepEqual(
      ids(
        await find(env, 'people', {
          filter: { n: { $or: [...range(MAX_OPERATOR_ELEMENTS - 1, 1000), { $eq: 7 }] } },
          limit: -1,
        }),
      ),
      ['p7'],
    );
  });

  it('$in with scalars keeps equality exact: numbers and big integers, strings, booleans, null, array values', async () => {
    await seed(env, 'kinds', []);
    // As text: the big integers must reach the service exact.
    const documents = [
      '{"id":"big","v":12345678901234567890}',
      '{"id":"two","v":2}',
      '{"id":"float","v":2.5}',
      '{"id":"text","v":"2"}',
      '{"id":"yes","v":true}',
      '{"id":"none","v":null}',
      '{"id":"list","v":["x",9007199254740993]}',
      '{"id":"missing"}',
    ];
    assert.equal(linesOf(await post(env, 'kinds:insert', documents.join('\n')), 201).length, 8);
    // Sent as text so the big integers stay exact.
    const findIds = async (filter: string) =>
      ids(linesOf(await post(env, 'kinds:find', `{"filter":${filter},"limit":-1}`)));
    assert.deepEqual(await findIds('{"v":{"$in":[12345678901234567890, 2.0]}}'), ['big', 'two']);
    assert.deepEqual(await findIds('{"v":{"$in":[2.5, "2", true]}}'), ['float', 'text', 'yes']);
    assert.deepEqual(await findIds('{"v":{"$in":[null]}}'), ['none', 'missing']);
    assert.deepEqual(await findIds('{"v":{"$in":[9007199254740993, {"$gt": 100}]}}'), ['big', 'list']);
    assert.deepEqual(await findIds('{"v":{"$nin":[2, "x", null, 12345678901234567891]}}'), [
      'big',
      'float',
      'text',
      'yes',
    ]);
  });
});

describe('large and costly documents', () => {
  // ~3 MB each: six of them make the collection larger than a read batch may hold (16 MB).
  const large = (i: number) => ({
    id: `large-${i}`,
    n: 1000 + i,
    values: new Array<number>(1_500_000).fill(i),
    text: 'y'.repeat(20_000),
  });

  before(async () => {
    // Small, medium (over the 16 KiB read with its batch) and large (over the 1 MiB tested on the
    // event loop) documents, interleaved.
    const documents: unknown[] = [];
    for (let i = 0; i < 6; i++) {
      documents.push({ id: `small-${i}`, n: i, values: [i] });
      documents.push({ id: `medium-${i}`, n: 100 + i, values: [i], text: 'x'.repeat(40_000) });
      documents.push(large(i));
    }
    await seed(env, 'mixed', documents);
  });

  it('find returns them in order, tested wherever they are tested', async () => {
    const all = await find(env, 'mixed', { limit: -1 });
    assert.deepEqual(
      ids(all),
      range(6).flatMap((i) => [`small-${i}`, `medium-${i}`, `large-${i}`]),
    );
    assert.equal((all.find((d) => d.id === 'large-2')?.values as number[]).length, 1_500_000);
    // values holds i: every document with i in {2, 4}, whatever its size.
    const hits = ids(await find(env, 'mixed', { filter: { values: { $in: [2, 4] } }, limit: -1 }));
    assert.deepEqual(hits, ['small-2', 'medium-2', 'large-2', 'small-4', 'medium-4', 'large-4']);
    // A heavier filter over the large arrays (the worker's path), with skip and limit.
    const heavy = { $or: range(10).map((k) => ({ values: { $gt: k + 3 } })) };
    assert.deepEqual(ids(await find(env, 'mixed', { filter: heavy, limit: -1 })), [
      'small-4',
      'medium-4',
      'large-4',
      'small-5',
      'medium-5',
      'large-5',
    ]);
    assert.deepEqual(ids(await find(env, 'mixed', { filter: heavy, skip: 2, limit: 2 })), ['large-4', 'small-5']);
  });

  it('patch and remove go through them too', async () => {
    const patched = linesOf(
      await post(env, 'mixed:patch', { filter: { values: { $in: [4] } }, patch: { seen: true }, limit: -1 }),
    );
    assert.deepEqual(ids(patched), ['small-4', 'medium-4', 'large-4']);
    assert.ok(patched.every((d) => d.seen === true));
    assert.deepEqual(ids(await find(env, 'mixed', { filter: { seen: true }, limit: -1 })), [
      'small-4',
      'medium-4',
      'large-4',
    ]);
    assert.deepEqual(ids(linesOf(await post(env, 'mixed:remove', { filter: { seen: true }, limit: -1 }))), [
      'small-4',
      'medium-4',
      'large-4',
    ]);
    assert.equal((await find(env, 'mixed', { limit: -1 })).length, 15);
  });

  it('index traversals and lookups by id read large documents alike', async () => {
    await createIndex(env, 'mixed', { name: 'by-n', type: 'btree', fields: ['-n'] });
    assert.deepEqual(ids(await find(env, 'mixed', { index: 'by-n', filter: { n: { $ge: 100 } }, limit: 4 })), [
      'large-5',
      'large-3',
      'large-2',
      'large-1',
    ]);
    assert.deepEqual(ids(await find(env, 'mixed', { index: 'by-n', filter: { n: { $lt: 1000 } }, limit: 3 })), [
      'medium-5',
      'medium-3',
      'medium-2',
    ]);
    const got = JSON.parse(
      (await env.service.app.inject({ method: 'GET', url: `${env.C}/mixed/documents/large-2`, headers: env.headers }))
        .body,
    ) as { document: { n: number }; source: unknown };
    assert.equal(got.document.n, 1002);
    assert.deepEqual(got.source, { type: 'fullscan' });
  });
});
