// The traversal pipeline (docdb.md §9.1), field paths (§9.2) and the filter language (§9.3), at
// the endpoint level, on SQLite or PostgreSQL.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  createIndex,
  errorLine,
  errorOf,
  find,
  ids,
  jsonOf,
  linesOf,
  parseLines,
  post,
  seed,
  startEnv,
  type Env,
} from './fixtures.ts';
import { EXAMPLE_DOCUMENTS, FILTER_EXAMPLES, INVALID_FILTER_EXAMPLE } from './query/filter-examples.ts';

let env: Env;
before(async () => {
  env = await startEnv();
  await seed(env, 'abc', EXAMPLE_DOCUMENTS);
});
after(async () => {
  await env.service.close();
});

const matching = async (filter: unknown, collection = 'abc'): Promise<unknown[]> =>
  ids(await find(env, collection, { filter, limit: 10 }));

describe('the §9.3 examples', () => {
  for (const [filter, expected] of FILTER_EXAMPLES) {
    it(JSON.stringify(filter), async () => {
      assert.deepEqual(await matching(filter), expected);
    });
  }

  it('{"n":{"$regex":"x"}} → 400 invalid_filter naming the operator', async () => {
    const message = errorOf(await post(env, 'abc:find', { filter: INVALID_FILTER_EXAMPLE }), 400, 'invalid_filter');
    assert.match(message, /\$regex/);
  });
});

describe('filter language, further', () => {
  it('equality: numbers numerically, deep arrays and objects, arrays by element', async () => {
    assert.deepEqual(await matching({ n: 1.0 }), ['a']);
    assert.deepEqual(await matching({ tags: ['red', 'blue'] }), ['a']);
    assert.deepEqual(await matching({ tags: ['blue', 'red'] }), []);
    assert.deepEqual(await matching({ tags: ['red'] }), []);
    assert.deepEqual(
      await matching({ address: { $eq: { city: 'Paris' } } }),
      ['b'],
      '$eq with an object operand is a condition (partial match)',
    );
    assert.deepEqual(await matching({ address: { city: 'Madrid', zip: '28001' } }), ['a']);
    assert.deepEqual(await matching({ address: { zip: null } }), ['b'], 'a missing member is null');
    assert.deepEqual(await matching({ 'address.zip': null }), ['b', 'c']);
    assert.deepEqual(await matching({ name: 'alice' }), [], 'case-sensitive');
    assert.deepEqual(await matching({ n: '1' }), [], 'no cross-kind equality');
    assert.deepEqual(await matching({ missing: null }), ['a', 'b', 'c']);
    assert.deepEqual(await matching({}), ['a', 'b', 'c']);
  });

  it('$ne on arrays excludes documents where any element matches; $nin likewise', async () => {
    assert.deepEqual(await matching({ tags: { $ne: 'red' } }), ['b', 'c']);
    assert.deepEqual(await matching({ tags: { $nin: ['red', 'green'] } }), ['c']);
    assert.deepEqual(await matching({ tags: { $in: ['green', 'x'] } }), ['b']);
    assert.deepEqual(await matching({ tags: { $in: [] } }), []);
    assert.deepEqual(await matching({ tags: { $nin: [] } }), ['a', 'b', 'c']);
    assert.deepEqual(await matching({ address: { $ne: null } }), ['a', 'b']);
    assert.deepEqual(await matching({ n: { $in: [{ $gt: 2 }, 1] } }), ['a', 'c'], '$in elements are conditions');
  });

  it('comparisons: same kind only; strings by code point; arrays if some element holds', async () => {
    assert.deepEqual(await matching({ name: { $gt: 'B' } }), ['b', 'c']);
    assert.deepEqual(await matching({ name: { $lt: 'Bob' } }), ['a']);
    assert.deepEqual(await matching({ name: { $lte: 'Bob' } }), ['a', 'b']);
    assert.deepEqual(await matching({ name: { $ge: 'Bob' } }), ['b', 'c']);
    assert.deepEqual(await matching({ n: { $gt: '1' } }), []);
    assert.deepEqual(await matching({ name: { $gt: 0 } }), []);
    assert.deepEqual(await matching({ tags: { $gt: 'n' } }), ['a'], 'red > n');
    assert.deepEqual(await matching({ tags: { $lt: 'c' } }), ['a']);
    assert.deepEqual(await matching({ n: { $gt: 1.5, $lt: 3 } }), ['b']);
    assert.deepEqual(await matching({ address: { $gt: '' } }), [], 'objects never compare');
    await seed(env, 'strings', [
      { id: 'z', s: 'z' },
      { id: 'e', s: 'é' },
      { id: 'bmp', s: '\uffff' },
      { id: 'astral', s: '😀' },
      { id: 'upper', s: 'Z' },
    ]);
    assert.deepEqual(await matching({ s: { $gt: 'z' } }, 'strings'), ['e', 'bmp', 'astral']);
    assert.deepEqual(await matching({ s: { $gt: '\uffff' } }, 'strings'), ['astral'], 'code point order, not UTF-16');
    assert.deepEqual(await matching({ s: { $lt: 'a' } }, 'strings'), ['upper']);
  });

  it('$contains: substrings of strings or of string elements; nothing else', async () => {
    assert.deepEqual(await matching({ tags: { $contains: 'ee' } }), ['b']);
    assert.deepEqual(await matching({ name: { $contains: '' } }), ['a', 'b', 'c']);
    assert.deepEqual(await matching({ missing: { $contains: '' } }), []);
    assert.deepEqual(await matching({ n: { $contains: '1' } }), []);
    assert.deepEqual(await matching({ name: { $contains: 'AL' } }), []);
    assert.deepEqual(await matching({ address: { $contains: 'Madrid' } }), []);
  });

  it('$and / $or at the top level and on a field; [] rules', async () => {
    assert.deepEqual(await matching({ $or: [{ n: 1 }, { name: 'Bob' }] }), ['a', 'b']);
    assert.deepEqual(await matching({ n: { $and: [{ $gt: 1 }, { $lt: 3 }] } }), ['b']);
    assert.deepEqual(await matching({ n: { $or: [1, { $ge: 3 }] } }), ['a', 'c']);
    assert.deepEqual(await matching({ $and: [] }), ['a', 'b', 'c']);
    assert.deepEqual(await matching({ $or: [] }), []);
    assert.deepEqual(
      await matching({ $or: [{ $and: [{ n: { $gte: 2 } }, { tags: { $ne: 'green' } }] }, { id: 'a' }] }),
      ['a', 'c'],
    );
    assert.deepEqual(await matching({ n: { $eq: { $in: [2, 3] } } }), ['b', 'c']);
    assert.deepEqual(await matching({ n: { $ne: { $gt: 1 } } }), ['a']);
  });

  it('paths: object members, array indexes, missing segments', async () => {
    assert.deepEqual(await matching({ 'tags.0': 'red' }), ['a']);
    assert.deepEqual(await matching({ 'tags.1': 'red' }), []);
    assert.deepEqual(await matching({ 'tags.1': 'blue' }), ['a']);
    assert.deepEqual(await matching({ 'tags.5': null }), ['a', 'b', 'c']);
    assert.deepEqual(await matching({ 'tags.01': 'blue' }), [], 'only canonical indexes');
    assert.deepEqual(await matching({ 'tags.x': null }), ['a', 'b', 'c']);
    assert.deepEqual(await matching({ 'address.city.x': null }), ['a', 'b', 'c']);
    assert.deepEqual(await matching({ 'n.0': null }), ['a', 'b', 'c']);
    await seed(env, 'paths', [
      {
        id: 'p',
        items: [
          { sku: 'x', q: 1 },
          { sku: 'y', q: 2 },
        ],
        'a.b': 1,
        a: { b: 2 },
      },
    ]);
    assert.deepEqual(
      await matching({ 'items.sku': 'x' }, 'paths'),
      [],
      'a non-numeric segment does not continue through an array',
    );
    assert.deepEqual(
      await matching({ items: { sku: 'y' } }, 'paths'),
      ['p'],
      'the array rule of object conditions does',
    );
    // Each entry holds on an array when it holds for some element (not necessarily the same one).
    assert.deepEqual(await matching({ items: { sku: 'y', q: 1 } }, 'paths'), ['p']);
    assert.deepEqual(await matching({ items: { sku: 'z' } }, 'paths'), []);
    assert.deepEqual(await matching({ 'items.1.q': { $gt: 1 } }, 'paths'), ['p']);
    assert.deepEqual(await matching({ 'a.b': 2 }, 'paths'), ['p'], 'dots always split in filters');
    assert.deepEqual(
      await matching({ constructor: null, toString: null, __proto__: null }, 'paths'),
      ['p'],
      'no prototype members',
    );
  });

  it('invalid filters → 400 invalid_filter before any line', async () => {
    const bad: unknown[] = [
      { n: { $regex: 'x' } },
      { $where: 'x' },
      { $and: [{ n: { $foo: 1 } }] },
      { $or: [{ a: 1 }, { b: { $in: [{ $bad: 1 }] } }] },
      { n: { $not: 1 } },
      { n: { $exists: true } },
      { n: { $gt: null } },
      { n: { $gt: true } },
      { n: { $lt: [1] } },
      { n: { $ge: {} } },
      { n: { $in: 1 } },
      { n: { $nin: 'abc' } },
      { n: { $contains: 1 } },
      { n: { $contains: null } },
      { $and: {} },
      { $or: 'x' },
      { a: { b: { c: { $size: 1 } } } },
      [],
      'string',
      1,
      null,
      true,
    ];
    for (const filter of bad) {
      const response = await post(env, 'abc:find', { filter, limit: -1 });
      errorOf(response, 400, 'invalid_filter');
    }
    assert.equal(
      errorOf(await post(env, 'abc:find', { filter: { n: { $xyz: 1 } } }), 400, 'invalid_filter'),
      "unknown operator '$xyz'",
    );
    // Nested beyond any sane depth: a 400, not a crash.
    const deep = `{"filter":${'{"$and":['.repeat(200)}1${']}'.repeat(200)}}`;
    errorOf(await post(env, 'abc:find', deep), 400, 'invalid_filter');
    const deepPath = `{"filter":${'{"a":'.repeat(300)}1${'}'.repeat(300)}}`;
    errorOf(await post(env, 'abc:find', deepPath), 400, 'invalid_filter');
    const deepLiteral = `{"filter":{"a":${'['.repeat(300)}${']'.repeat(300)}}}`;
    errorOf(await post(env, 'abc:find', deepLiteral), 400, 'invalid_filter');
    // Bodies nested thousands of levels deep are refused as a whole.
    const deeper = `{"filter":${'{"$and":['.repeat(5000)}1${']}'.repeat(5000)}}`;
    errorOf(await post(env, 'abc:find', deeper), 400, 'validation_error');
    // Objects inside an array literal are values, not conditions.
    assert.deepEqual(await matching({ tags: [{ $bad: 1 }] }), []);
  });
});

describe('the traversal pipeline (§9.1)', () => {
  before(async () => {
    await seed(
      env,
      'pipe',
      Array.from({ length: 10 }, (_, i) => ({ id: `p${i}`, i, even: i % 2 === 0 })),
    );
  });

  it('limit: 1 by default, 0 → none, negative → all', async () => {
    assert.deepEqual(ids(await find(env, 'pipe')), ['p0']);
    assert.deepEqual(ids(await find(env, 'pipe', { limit: 3 })), ['p0', 'p1', 'p2']);
    const none = await post(env, 'pipe:find', { limit: 0 });
    assert.equal(none.statusCode, 200);
    assert.equal(none.body, '');
    assert.equal((await find(env, 'pipe', { limit: -1 })).length, 10);
    assert.equal((await find(env, 'pipe', { limit: -100 })).length, 10);
    assert.equal((await find(env, 'pipe', { limit: 1000 })).length, 10);
    assert.deepEqual(ids(await find(env, 'pipe', { limit: null })), ['p0'], 'null is the default');
  });

  it('skip drops matching documents only; ≤ 0 means none', async () => {
    assert.deepEqual(ids(await find(env, 'pipe', { skip: 2, limit: 2 })), ['p2', 'p3']);
    assert.deepEqual(ids(await find(env, 'pipe', { skip: -5, limit: 2 })), ['p0', 'p1']);
    assert.deepEqual(ids(await find(env, 'pipe', { skip: 1, limit: -1, filter: { even: true } })), [
      'p2',
      'p4',
      'p6',
      'p8',
    ]);
    assert.deepEqual(ids(await find(env, 'pipe', { skip: 10, limit: -1 })), []);
    assert.deepEqual(ids(await find(env, 'pipe', { skip: 1e9, limit: -1 })), []);
    assert.deepEqual(ids(await find(env, 'pipe', { skip: 3, limit: 0 })), []);
  });

  it('filter after the index; a unique map index gives at most one candidate', async () => {
    await createIndex(env, 'pipe', { name: 'by-id', type: 'map', field: 'id' });
    await createIndex(env, 'pipe', { name: 'by-i', type: 'btree', fields: ['-i'] });
    assert.deepEqual(ids(await find(env, 'pipe', { index: 'by-id', value: 'p3', limit: -1 })), ['p3']);
    assert.deepEqual(ids(await find(env, 'pipe', { index: 'by-id', value: 'p3', skip: 1 })), []);
    assert.deepEqual(ids(await find(env, 'pipe', { index: 'by-id', value: 'p3', filter: { even: true } })), []);
    assert.deepEqual(ids(await find(env, 'pipe', { index: 'by-i', filter: { even: true }, skip: 1, limit: 2 })), [
      'p6',
      'p4',
    ]);
    assert.deepEqual(ids(await find(env, 'pipe', { index: 'by-i', filter: { i: { $lt: 3 } }, limit: -1 })), [
      'p2',
      'p1',
      'p0',
    ]);
    assert.deepEqual(ids(await find(env, 'pipe', { index: null, limit: 2 })), ['p0', 'p1']);
  });

  it('checks the body: types (400), collection (404), index (404), filter (400)', async () => {
    errorOf(await post(env, 'pipe:find', ''), 400, 'invalid_json');
    errorOf(await post(env, 'pipe:find', '{'), 400, 'invalid_json');
    errorOf(await post(env, 'pipe:find', '[]'), 400, 'validation_error');
    errorOf(await post(env, 'pipe:find', 'null'), 400, 'validation_error');
    for (const body of [
      { limit: 1.5 },
      { limit: '10' },
      { skip: '1' },
      { skip: 0.5 },
      { index: 5 },
      { index: {} },
      { limit: true },
    ]) {
      errorOf(await post(env, 'pipe:find', body), 400, 'validation_error');
    }
    errorOf(await post(env, 'nowhere:find', {}), 404, 'not_found');
    // Body types come before the collection lookup.
    errorOf(await post(env, 'nowhere:find', { limit: 'x' }), 400, 'validation_error');
    errorOf(await post(env, 'nowhere:remove', { index: 1 }), 400, 'validation_error');
    errorOf(await post(env, 'nowhere:patch', { filter: {} }), 400, 'validation_error');
    assert.equal(
      errorOf(await post(env, 'pipe:find', { index: 'nope' }), 404, 'not_found'),
      "index 'nope' not found in collection 'pipe'",
    );
    errorOf(await post(env, 'pipe:find', { index: 'nope', filter: { $bad: 1 } }), 404, 'not_found');
    errorOf(await post(env, 'nowhere:find', { filter: { $bad: 1 } }), 404, 'not_found');
    // Unknown fields are ignored; large integers are fine.
    assert.deepEqual(ids(await find(env, 'pipe', { mode: 'whatever', limit: 1, unknown: { x: 1 } })), ['p0']);
    assert.equal(linesOf(await post(env, 'pipe:find', '{"limit":123456789012345678901234567890}')).length, 10);
    assert.equal(linesOf(await post(env, 'pipe:find', '{"skip":123456789012345678901234567890,"limit":-1}')).length, 0);
    // Any content type.
    assert.equal(linesOf(await post(env, 'pipe:find', '{"limit":2}', { 'content-type': 'text/plain' })).length, 2);
  });

  it('a find body over 10 MiB → 413', async () => {
    const huge = JSON.stringify({ filter: { x: 'y'.repeat(10 * 1024 * 1024 + 1) } });
    errorOf(await post(env, 'pipe:find', huge), 413, 'payload_too_large');
  });
});

describe('no value crashes a query', () => {
  it('mixed types in documents and operands', async () => {
    const weird = [
      { id: 'n', v: null },
      { id: 't', v: true },
      { id: 'f', v: false },
      { id: 'num', v: 1.5 },
      { id: 's', v: 'str' },
      { id: 'arr', v: [null, true, 1, 'x', [1], { a: 1 }] },
      { id: 'obj', v: { a: [1, { b: null }] } },
      { id: 'empty', v: {} },
      { id: 'none' },
    ];
    await seed(env, 'weird', weird);
    const body = '{"id":"big","v":123456789012345678901234567890}';
    assert.equal((await post(env, 'weird:insert', body)).statusCode, 201);
    const filters: [unknown, string[]][] = [
      [{ v: null }, ['n', 'arr', 'none']],
      [{ v: true }, ['t', 'arr']],
      [{ v: false }, ['f']],
      [{ v: 1 }, ['arr']],
      [{ v: [1] }, ['arr']],
      [{ v: { a: 1 } }, ['arr', 'obj']],
      [{ v: {} }, ['n', 't', 'f', 'num', 's', 'arr', 'obj', 'empty', 'none', 'big']],
      [{ v: { $eq: {} } }, ['n', 't', 'f', 'num', 's', 'arr', 'obj', 'empty', 'none', 'big']],
      [{ v: { $in: [[1], {}] } }, ['n', 't', 'f', 'num', 's', 'arr', 'obj', 'empty', 'none', 'big']],
      [{ v: { $gt: 1 } }, ['num', 'big']],
      [{ v: { $gt: 1e29 } }, ['big']],
      [{ v: { $lt: 'y' } }, ['s', 'arr']],
      [{ v: { $contains: 'x' } }, ['arr']],
      [{ 'v.a': 1 }, ['obj']],
      [{ 'v.a.1.b': null }, ['n', 't', 'f', 'num', 's', 'arr', 'obj', 'empty', 'none', 'big']],
      [{ 'v.a.0': 1 }, ['obj']],
      [{ 'v.5.a': 1 }, ['arr']],
      [{ v: { a: { $contains: 'x' } } }, []],
      [{ v: { $ne: null } }, ['t', 'f', 'num', 's', 'obj', 'empty', 'big']],
    ];
    for (const [filter, expected] of filters) {
      assert.deepEqual(ids(await find(env, 'weird', { filter, limit: -1 })), expected, JSON.stringify(filter));
    }
    const exact = await post(env, 'weird:find', '{"filter":{"v":123456789012345678901234567890}}');
    assert.equal(exact.body, `${body}\n`);
    // The same values through a btree index.
    await createIndex(env, 'weird', { name: 'bt', type: 'btree', fields: ['v'], sparse: true });
    assert.deepEqual(ids(await find(env, 'weird', { index: 'bt', limit: -1 })), [
      'n',
      'f',
      't',
      'num',
      'big',
      's',
      'arr',
      'empty',
      'obj',
    ]);
    assert.deepEqual(
      ids(await find(env, 'weird', { index: 'bt', limit: -1, from: { v: [] }, to: { v: { a: [2] } } })),
      ['arr', 'empty', 'obj'],
    );
  });

  it('deeply nested documents: up to 1000 levels stored, deeper ones refused with a 400', async () => {
    // `levels` objects nested in one another.
    const nest = (levels: number, leaf = '"bottom"') => `${'{"a":'.repeat(levels)}${leaf}${'}'.repeat(levels)}`;
    // The document itself is level 1.
    const ok = await post(env, 'deep:insertFullduplex', `{"id":"deep","d":${nest(999)}}`);
    assert.equal(ok.statusCode, 200, ok.body.slice(0, 200));
    errorOf(await post(env, 'deep:insertFullduplex', `{"id":"deeper","d":${nest(1000)}}`), 400, 'validation_error');
    errorOf(await post(env, 'deep:insertFullduplex', `{"id":"deepest","d":${nest(50000)}}`), 400, 'validation_error');
    const arrays = await post(
      env,
      'deep:insertFullduplex',
      `{"id":"ok"}\n{"d":${'['.repeat(20000)}${']'.repeat(20000)}}\n{"id":"after"}`,
    );
    const lines = linesOf(arrays);
    assert.deepEqual(lines[0], { id: 'ok' });
    errorLine(lines[1], 400, 'validation_error');
    const stream = parseLines((await post(env, 'deep:insertStream', `{"d":${nest(5000)}}\n{"id":"next"}`)).body);
    assert.equal(typeof stream[0], 'string');
    assert.deepEqual(stream[1], { id: 'next' });
    // Patches, defaults and pivots are held to the same limit.
    errorOf(await post(env, 'deep:patch', `{"patch":{"d":${nest(5000)}}}`), 400, 'validation_error');
    errorOf(await post(env, 'deep:patch', `{"patch":{"d":${nest(1000)}}}`), 400, 'validation_error');
    errorOf(await post(env, 'deep:setDefaults', `{"d":${nest(1000)}}`), 400, 'validation_error');
    errorOf(await post(env, '', `{"name":"deep-defaults","defaults":{"d":${nest(1000)}}}`), 400, 'validation_error');
    // A btree key of the deep document is too long (409), not a crash.
    errorOf(
      await post(env, 'deep:createIndex', { name: 'bt', type: 'btree', fields: ['d'], sparse: true }),
      409,
      'conflict',
    );
    await createIndex(env, 'deep', { name: 'bt', type: 'btree', fields: ['id'] });
    errorOf(await post(env, 'deep:find', `{"index":"bt","from":{"id":${nest(20000)}}}`), 400, 'validation_error');
    assert.equal(linesOf(await post(env, 'deep:find', `{"index":"bt","to":{"id":${nest(998)}},"limit":-1}`)).length, 3);
    const patched = linesOf(
      await post(env, 'deep:patch', `{"filter":{"id":"deep"},"patch":{"d":${nest(999, '"top"')}}}`),
    );
    assert.equal(patched.length, 1);
    const found = await post(env, 'deep:find', { filter: { d: { a: { a: { $ne: 1 } } } }, limit: -1 });
    assert.equal(found.statusCode, 200);
    jsonOf(await post(env, 'deep:size'));
  });
});

describe('answers kept between finds (repository/answers.ts)', () => {
  it('a repeated find answers alike, and every change to the collection shows in the next one', async () => {
    await seed(env, 'kept', [
      { id: 'a', k: 'x', n: 1 },
      { id: 'b', k: 'y', n: 2 },
    ]);
    await createIndex(env, 'kept', { name: 'by-k', type: 'map', field: 'k', unique: false });
    const lookup = { index: 'by-k', value: 'x', limit: -1 };
    const scan = { filter: { n: { $ge: 1 } }, limit: -1 };
    const answer = async (body: object) => {
      const response = await post(env, 'kept:find', body);
      assert.equal(response.statusCode, 200);
      assert.equal(response.headers['content-type'], 'application/json');
      assert.equal(response.headers['content-length'], String(Buffer.byteLength(response.body)));
      return response.body;
    };
    for (let i = 0; i < 2; i++) {
      assert.equal(await answer(lookup), '{"id":"a","k":"x","n":1}\n');
      assert.equal(await answer(scan), '{"id":"a","k":"x","n":1}\n{"id":"b","k":"y","n":2}\n');
      assert.equal(await answer({ index: 'by-k', value: 'none' }), '');
    }
    linesOf(await post(env, 'kept:insert', '{"id":"c","k":"x","n":3}'), 201);
    assert.equal(await answer(lookup), '{"id":"a","k":"x","n":1}\n{"id":"c","k":"x","n":3}\n');
    linesOf(await post(env, 'kept:patch', { filter: { id: 'a' }, patch: { n: 4 } }));
    assert.equal(await answer(lookup), '{"id":"a","k":"x","n":4}\n{"id":"c","k":"x","n":3}\n');
    linesOf(await post(env, 'kept:remove', { filter: { id: 'c' } }));
    assert.equal(await answer(lookup), '{"id":"a","k":"x","n":4}\n');
    assert.equal(await answer(scan), '{"id":"a","k":"x","n":4}\n{"id":"b","k":"y","n":2}\n');
    // Errors are never kept: a dropped index or collection answers 404 at once.
    assert.equal((await post(env, 'kept:dropIndex', { name: 'by-k' })).statusCode, 204);
    errorOf(await post(env, 'kept:find', lookup), 404, 'not_found');
    assert.equal((await post(env, 'kept:dropCollection')).statusCode, 204);
    errorOf(await post(env, 'kept:find', scan), 404, 'not_found');
    // A collection made again under the name starts empty.
    await seed(env, 'kept', [{ id: 'z', n: 9 }]);
    assert.equal(await answer(scan), '{"id":"z","n":9}\n');
  });

  it('finds running beside writes never keep an answer older than an acknowledged write', async () => {
    await seed(env, 'kept-race', [{ id: 'a', k: 'x', n: 0 }]);
    await createIndex(env, 'kept-race', { name: 'by-k', type: 'map', field: 'k', unique: false });
    const lookup = { index: 'by-k', value: 'x', limit: -1 };
    for (let n = 1; n <= 20; n++) {
      const finds = Array.from({ length: 5 }, () => post(env, 'kept-race:find', lookup));
      const write = post(env, 'kept-race:patch', { ...lookup, patch: { n } });
      await Promise.all([...finds, write]);
      assert.equal((await write).statusCode, 200);
      assert.equal((await post(env, 'kept-race:find', lookup)).body, `{"id":"a","k":"x","n":${n}}\n`);
    }
  });
});
