// Inserts are batched (README: Storage): the documents of one chunk of the body are judged and
// written together. A batch must answer and store exactly what the same documents sent one request
// at a time do: unique keys held by stored documents or by earlier documents of the batch (not by
// rejected ones), refusals in index order, the auto() counter, insertion order. On SQLite or
// PostgreSQL (one request body arrives as one chunk, so it is one batch).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createIndex, errorOf, find, get, jsonOf, linesOf, ndjson, parseLines, post, useEnv } from './fixtures.ts';

const env = useEnv();

/** A collection with an auto() counter, one stored document and four indexes, two of them unique. */
async function prepared(name: string): Promise<void> {
  jsonOf(await post(env, '', { name, defaults: { n: 'auto()' } }), 201);
  await createIndex(env, name, { name: 'by-id', type: 'map', field: 'id' });
  await createIndex(env, name, { name: 'by-tags', type: 'map', field: 'tags' });
  await createIndex(env, name, { name: 'by-cat', type: 'btree', fields: ['cat', '-n'] });
  await createIndex(env, name, { name: 'by-code', type: 'btree', field: 'code', sparse: true, unique: true });
  linesOf(await post(env, `${name}:insert`, ndjson([{ id: 'pre', tags: ['pre'], cat: 'c0' }])), 201);
}

const CASES: unknown[] = [
  { id: 'a', tags: ['x', 'y'], cat: 'c1' },
  // by-tags: its second key is the one taken (by the document just before, in this batch).
  { id: 'b', tags: ['z', 'x'], cat: 'c1' },
  // 'b' is free: the document above was rejected and holds nothing.
  { id: 'b', tags: ['w'], cat: 'c2' },
  // Two faults: by-id (the first index) is the one reported.
  { id: 'a', cat: 'c3' },
  { id: 'c' },
  [1],
  'text',
  { id: 'c', tags: [], cat: 'c4' },
  { id: 'd', tags: ['q'], cat: 'c1', code: 1 },
  // Equal in the total order: 1.0 = 1.
  { id: 'e', tags: ['r'], cat: 'c1', code: 1.0 },
  { id: 'f', tags: 's', cat: 7 },
  // Held by the document stored before the batch.
  { id: 'pre', tags: ['p2'], cat: 'c1' },
  { id: 'g', tags: ['pre'], cat: 'c1' },
  { id: 'h', tags: ['h', 'h', 'i'], cat: null },
  { id: 'i', tags: ['i'], cat: 'c5' },
  { id: 7, cat: 'c1', tags: ['seven'] },
];
// Past the largest statement of a batch on SQLite (1,024 rows), with a repeat in the middle.
const BULK: unknown[] = Array.from({ length: 1_100 }, (_, i) =>
  i === 800 ? { id: 'bulk-500', tags: ['other'], cat: 'c' } : { id: `bulk-${i}`, tags: [`t${i}`], cat: `c${i % 7}` },
);
const DOCUMENTS = [...CASES, ...BULK];

/** What a collection holds: every document in insertion order and through each index. */
async function contents(name: string): Promise<unknown> {
  return {
    // The record without its name.
    record: { ...jsonOf(await get(env, name)), name: undefined },
    size: jsonOf(await post(env, `${name}:size`)),
    scan: await find(env, name, { limit: -1 }),
    byCat: await find(env, name, { index: 'by-cat', limit: -1 }),
    byCode: await find(env, name, { index: 'by-code', limit: -1 }),
    tagged: await find(env, name, { index: 'by-tags', value: 'x', limit: -1 }),
  };
}

describe('a batch of documents is judged as if they came one by one', () => {
  it(':insertStream: the same lines, documents and counter as one request per document', async () => {
    await prepared('one-by-one');
    await prepared('batched');
    const expected: unknown[] = [];
    for (const document of DOCUMENTS) {
      const response = await post(env, 'one-by-one:insertStream', `${JSON.stringify(document)}\n`);
      assert.equal(response.statusCode, 202);
      expected.push(...parseLines(response.body));
    }
    const response = await post(env, 'batched:insertStream', ndjson(DOCUMENTS));
    assert.equal(response.statusCode, 202);
    const lines = parseLines(response.body);
    assert.deepEqual(lines, expected);
    // The cases above meant what they say.
    assert.deepEqual(lines.slice(0, 5), [
      { id: 'a', tags: ['x', 'y'], cat: 'c1', n: 2 },
      "index add 'by-tags': index conflict: field 'tags' with value 'x'",
      { id: 'b', tags: ['w'], cat: 'c2', n: 4 },
      "index add 'by-id': index conflict: field 'id' with value 'a'",
      "index add 'by-tags': field `tags` is indexed and mandatory",
    ]);
    assert.equal(lines[9], "index add 'by-code': key (code:1) already exists");
    assert.equal(lines[11], "index add 'by-id': index conflict: field 'id' with value 'pre'");
    assert.equal(lines[12], "index add 'by-tags': index conflict: field 'tags' with value 'pre'");
    assert.equal(lines[15], "index add 'by-id': type not supported");
    assert.equal(lines[CASES.length + 800], "index add 'by-id': index conflict: field 'id' with value 'bulk-500'");
    assert.deepEqual(await contents('batched'), await contents('one-by-one'));
    // The counter went up once per value tried, rejected ones included.
    const next = linesOf(await post(env, 'batched:insert', '{"id":"next","tags":[],"cat":1}'), 201);
    assert.deepEqual(next, [{ id: 'next', tags: [], cat: 1, n: DOCUMENTS.length + 2 }]);
  });

  it(':insert: stops at the first rejected document, keeping the ones before it, like one by one', async () => {
    await prepared('stop-one');
    await prepared('stop-batch');
    // One request per document up to the first refusal: the documents before it stay.
    const expected: unknown[] = [];
    for (const document of DOCUMENTS) {
      const response = await post(env, 'stop-one:insert', `${JSON.stringify(document)}\n`);
      if (response.statusCode !== 201) {
        expected.push({ error: { status: 409, code: 'conflict', message: errorOf(response, 409, 'conflict') } });
        break;
      }
      expected.push(...linesOf(response, 201));
    }
    assert.equal(expected.length, 2);
    const lines = linesOf(await post(env, 'stop-batch:insert', ndjson(DOCUMENTS)), 201);
    assert.deepEqual(lines, expected);
    assert.deepEqual(await contents('stop-batch'), await contents('stop-one'));
    // Two values tried (the refused one counts), nothing after it.
    const next = linesOf(await post(env, 'stop-batch:insert', '{"id":"next","tags":[],"cat":1}'), 201);
    assert.deepEqual(next, [{ id: 'next', tags: [], cat: 1, n: 4 }]);
  });

  it(':insert: a refusal in the middle of a large batch keeps every document before it, in order', async () => {
    await prepared('stop-bulk');
    const lines = linesOf(await post(env, 'stop-bulk:insert', ndjson(BULK)), 201);
    assert.equal(lines.length, 801);
    assert.deepEqual(
      lines.slice(0, 800),
      BULK.slice(0, 800).map((document, i) => ({ ...(document as object), n: i + 2 })),
    );
    assert.equal(
      (lines[800] as { error: { message: string } }).error.message,
      "index add 'by-id': index conflict: field 'id' with value 'bulk-500'",
    );
    const stored = await find(env, 'stop-bulk', { limit: -1 });
    assert.deepEqual(
      stored.map((document) => document.id),
      ['pre', ...BULK.slice(0, 800).map((document) => (document as { id: string }).id)],
    );
    assert.deepEqual(await find(env, 'stop-bulk', { index: 'by-id', value: 'bulk-799' }), [lines[799]]);
    assert.deepEqual(await find(env, 'stop-bulk', { index: 'by-tags', value: 't800' }), []);
  });
});
