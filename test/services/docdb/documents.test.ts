// Document endpoints (docdb.md §6, §10, §11): insert, insertFullduplex, insertStream, patch,
// remove, get by id, defaults and generators, big integers. On SQLite or PostgreSQL.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { VERSION } from '../../../src/core/version.ts';
import { docdbService } from '../../../src/services/docdb/index.ts';
import { UUID_V4 } from '../../helpers/envelope.ts';
import {
  createIndex,
  errorLine,
  errorOf,
  find,
  get,
  ids,
  insert,
  jsonOf,
  linesOf,
  ndjson,
  parseLines,
  post,
  seed,
  useEnv,
} from './fixtures.ts';

const env = useEnv();

const total = async (collection: string): Promise<number> =>
  jsonOf<{ total: number }>(await get(env, collection)).total;
const all = (collection: string) => find(env, collection, { limit: -1 });

describe(':insert', () => {
  it('201 with one NDJSON line per stored document; a missing collection gets {"id":"uuid()"}', async () => {
    const response = await post(
      env,
      'ins-basic:insert',
      ndjson([{ name: 'a' }, { id: 'own', name: 'b' }, { id: null, name: 'c' }, { id: '', name: 'd' }]),
    );
    const lines = linesOf(response, 201);
    assert.equal(response.headers['content-type'], 'application/json');
    assert.equal(lines.length, 4);
    assert.match(lines[0]!.id as string, UUID_V4);
    assert.deepEqual(Object.keys(lines[0]!), ['name', 'id']);
    assert.deepEqual(lines[1], { id: 'own', name: 'b' });
    assert.match(lines[2]!.id as string, UUID_V4, '{"id":null} gets a generated id');
    assert.deepEqual(Object.keys(lines[2]!), ['id', 'name'], 'a present null is replaced in place');
    assert.deepEqual(lines[3], { id: '', name: 'd' }, '{"id":""} keeps ""');
    assert.notEqual(lines[0]!.id, lines[2]!.id);
    assert.deepEqual(jsonOf(await get(env, 'ins-basic')), {
      name: 'ins-basic',
      total: 4,
      indexes: 0,
      defaults: { id: 'uuid()' },
    });
    // Stored as returned, in insertion order.
    assert.deepEqual(await all('ins-basic'), lines);
  });

  it('an empty or whitespace-only body → 204, nothing inserted', async () => {
    for (const body of ['', ' \n\t\r\n ']) {
      const response = await post(env, 'ins-empty:insert', body);
      assert.equal(response.statusCode, 204);
      assert.equal(response.body, '');
    }
    const none = await post(env, 'ins-empty:insert');
    assert.equal(none.statusCode, 204);
    assert.equal(await total('ins-empty'), 0);
  });

  it('accepts NDJSON, a single object, pretty-printed and back-to-back objects, whatever the content type', async () => {
    await seed(env, 'ins-format', []);
    const bodies: [string, Record<string, string>][] = [
      ['{"n":1}', { 'content-type': 'application/json' }],
      ['{"n":2}\n{"n":3}\n', { 'content-type': 'application/x-ndjson' }],
      [
        '{\n  "n": 4,\n  "deep": {\n    "a": [\n      1,\n      2\n    ]\n  }\n}\n\n{\n  "n": 5\n}',
        { 'content-type': 'application/jsonl' },
      ],
      ['{"n":6}{"n":7}  {"n":8}\t\r\n{"n":9}', { 'content-type': 'text/plain' }],
      ['   {"n":10, "s":"} { \\" ]"}   ', {}],
    ];
    let expected = 0;
    for (const [body, headers] of bodies) {
      const lines = linesOf(await post(env, 'ins-format:insert', body, headers), 201);
      for (const line of lines) assert.equal(line.n, ++expected);
    }
    assert.equal(expected, 10);
    const stored = await all('ins-format');
    assert.deepEqual(stored[3], { n: 4, deep: { a: [1, 2] } });
    assert.deepEqual(stored[9], { n: 10, s: '} { " ]' });
  });

  it('400 invalid_json when the first value is malformed; nothing inserted', async () => {
    await seed(env, 'ins-bad-first', []);
    for (const body of ['{bad', '{"a":1', '}', ']', 'nope', '{"a":1,}', '{"a":01}', '"unterminated']) {
      errorOf(await post(env, 'ins-bad-first:insert', body), 400, 'invalid_json');
    }
    assert.equal(await total('ins-bad-first'), 0);
  });

  it('400 validation_error when the first value is not an object; nothing inserted', async () => {
    await seed(env, 'ins-not-object', []);
    for (const body of ['null', '[]', '[{"a":1}]', '3', '"x"', 'true', 'false', '-1.5e3']) {
      errorOf(await post(env, 'ins-not-object:insert', `${body}\n{"a":1}`), 400, 'validation_error');
    }
    assert.equal(await total('ins-not-object'), 0);
  });

  it('409 when the first document is rejected by an index; nothing inserted', async () => {
    await seed(env, 'ins-conflict-first', [{ id: 'a' }]);
    await createIndex(env, 'ins-conflict-first', { name: 'by-id', type: 'map', field: 'id' });
    const message = errorOf(
      await post(env, 'ins-conflict-first:insert', ndjson([{ id: 'a' }, { id: 'b' }])),
      409,
      'conflict',
    );
    assert.equal(message, "index add 'by-id': index conflict: field 'id' with value 'a'");
    assert.deepEqual(ids(await all('ins-conflict-first')), ['a']);
  });

  it('a later malformed value: 201, the documents before it stay, one error line, processing stops', async () => {
    await seed(env, 'ins-later-bad', []);
    const response = await post(env, 'ins-later-bad:insert', '{"id":"1"}\n{bad');
    const lines = linesOf(response, 201);
    assert.equal(lines.length, 2);
    assert.deepEqual(lines[0], { id: '1' });
    errorLine(lines[1], 400, 'invalid_json');
    const more = linesOf(await post(env, 'ins-later-bad:insert', '{"id":"2"}{"id":"3"}\n{"id":4,}\n{"id":"5"}\n'), 201);
    assert.deepEqual(more.slice(0, 2), [{ id: '2' }, { id: '3' }]);
    errorLine(more[2], 400, 'invalid_json');
    assert.equal(more.length, 3);
    // Truncated at the end of the body.
    const truncated = linesOf(await post(env, 'ins-later-bad:insert', '{"id":"6"}\n{"id":"7"'), 201);
    assert.deepEqual(truncated[0], { id: '6' });
    errorLine(truncated[1], 400, 'invalid_json');
    assert.deepEqual(ids(await all('ins-later-bad')), ['1', '2', '3', '6']);
  });

  it('a later non-object or index conflict: an error line and processing stops', async () => {
    await seed(env, 'ins-later-reject', []);
    await createIndex(env, 'ins-later-reject', { name: 'by-id', type: 'map', field: 'id' });
    const first = linesOf(await post(env, 'ins-later-reject:insert', '{"id":"a"}\n[1]\n{"id":"b"}'), 201);
    assert.deepEqual(first[0], { id: 'a' });
    errorLine(first[1], 400, 'validation_error');
    assert.equal(first.length, 2);
    const second = linesOf(
      await post(env, 'ins-later-reject:insert', ndjson([{ id: 'c' }, { id: 'a' }, { id: 'd' }])),
      201,
    );
    assert.deepEqual(second[0], { id: 'c' });
    assert.equal(errorLine(second[1], 409, 'conflict'), "index add 'by-id': index conflict: field 'id' with value 'a'");
    assert.equal(second.length, 2);
    const third = linesOf(await post(env, 'ins-later-reject:insert', ndjson([{ id: 'e' }, { id: 7 }])), 201);
    assert.equal(errorLine(third[1], 409, 'conflict'), "index add 'by-id': type not supported");
    assert.deepEqual(ids(await all('ins-later-reject')), ['a', 'c', 'e']);
    assert.equal(await total('ins-later-reject'), 3);
  });

  it('many documents in one body come back in order', async () => {
    await seed(env, 'ins-many', []);
    const documents = Array.from({ length: 3000 }, (_, i) => ({ i, text: `doc ${i}` }));
    const lines = linesOf(await post(env, 'ins-many:insert', ndjson(documents)), 201);
    assert.deepEqual(lines, documents);
    assert.equal(await total('ins-many'), 3000);
    assert.deepEqual(await find(env, 'ins-many', { skip: 2998, limit: -1 }), documents.slice(2998));
  });

  it('keeps key order, unicode, escapes and __proto__ members as stored', async () => {
    await seed(env, 'ins-text', []);
    const text =
      '{"z":1,"a":{"y":[true,false,null],"b":"é😀\\u0000\\n\\"q\\""},"__proto__":{"x":1},"m":-0.5,"e":1e300}';
    const response = await post(env, 'ins-text:insert', text);
    assert.equal(response.statusCode, 201);
    const line = JSON.parse(response.body) as Record<string, unknown>;
    assert.deepEqual(Object.keys(line), ['z', 'a', '__proto__', 'm', 'e']);
    assert.equal(response.body, `${JSON.stringify(JSON.parse(text))}\n`);
    const found = await post(env, 'ins-text:find', {});
    assert.equal(found.body, response.body);
  });

  it('names the collection with the same rules as POST $C', async () => {
    errorOf(await post(env, 'bad%2Fname:insert', '{}'), 400, 'validation_error');
    errorOf(await post(env, `${'x'.repeat(256)}:insert`, '{}'), 400, 'validation_error');
    errorOf(await post(env, 'ctl%7F:insertFullduplex', '{}'), 400, 'validation_error');
    errorOf(await post(env, '..:insertStream', '{}'), 400, 'validation_error');
  });

  it('a document over 10 MiB: 413 when first, an error line when later', async () => {
    await seed(env, 'ins-huge', []);
    const huge = JSON.stringify({ blob: 'x'.repeat(10 * 1024 * 1024 + 10) });
    errorOf(await post(env, 'ins-huge:insert', huge), 413, 'payload_too_large');
    const lines = linesOf(await post(env, 'ins-huge:insert', `{"id":"small"}\n${huge}\n{"id":"after"}`), 201);
    assert.deepEqual(lines[0], { id: 'small' });
    errorLine(lines[1], 413, 'payload_too_large');
    assert.equal(lines.length, 2);
    assert.deepEqual(ids(await all('ins-huge')), ['small']);
    // Just under the limit is fine.
    const big = JSON.stringify({ id: 'big', blob: 'y'.repeat(10 * 1024 * 1024 - 100) });
    const stored = linesOf(await post(env, 'ins-huge:insert', big), 201);
    assert.equal(stored[0]!.id, 'big');
  });
});

describe(':insertFullduplex', () => {
  it('200; a missing collection is created without defaults (no id generated)', async () => {
    const response = await post(env, 'fd-new:insertFullduplex', ndjson([{ a: 1 }, { a: 2 }]));
    assert.deepEqual(linesOf(response, 200), [{ a: 1 }, { a: 2 }]);
    assert.equal(response.headers['content-type'], 'application/json');
    assert.deepEqual(jsonOf(await get(env, 'fd-new')), { name: 'fd-new', total: 2, indexes: 0, defaults: null });
  });

  it('applies the defaults of an existing collection', async () => {
    jsonOf(await post(env, '', { name: 'fd-defaults', defaults: { id: 'uuid()', n: 'auto()' } }), 201);
    const [line] = linesOf(await post(env, 'fd-defaults:insertFullduplex', '{"x":1}'));
    assert.match(line!.id as string, UUID_V4);
    assert.equal(line!.n, 1);
  });

  it('empty body → 200 empty; first error → envelope; later error → error line', async () => {
    const empty = await post(env, 'fd-errors:insertFullduplex', '  ');
    assert.equal(empty.statusCode, 200);
    assert.equal(empty.body, '');
    errorOf(await post(env, 'fd-errors:insertFullduplex', '{oops'), 400, 'invalid_json');
    errorOf(await post(env, 'fd-errors:insertFullduplex', '[1,2]'), 400, 'validation_error');
    await createIndex(env, 'fd-errors', { name: 'by-k', type: 'map', field: 'k' });
    linesOf(await post(env, 'fd-errors:insertFullduplex', '{"k":"one"}'));
    errorOf(await post(env, 'fd-errors:insertFullduplex', '{"k":"one"}'), 409, 'conflict');
    const lines = linesOf(await post(env, 'fd-errors:insertFullduplex', '{"k":"two"}\n{"k":"one"}\n{"k":"three"}'));
    assert.deepEqual(lines[0], { k: 'two' });
    errorLine(lines[1], 409, 'conflict');
    assert.equal(lines.length, 2);
    const bad = linesOf(await post(env, 'fd-errors:insertFullduplex', '{"k":"four"} "str"'));
    errorLine(bad[1], 400, 'validation_error');
    const malformed = linesOf(await post(env, 'fd-errors:insertFullduplex', '{"k":"five"} {,}'));
    errorLine(malformed[1], 400, 'invalid_json');
    assert.deepEqual(
      (await all('fd-errors')).map((d) => d.k),
      ['one', 'two', 'four', 'five'],
    );
  });
});

describe(':insertStream', () => {
  const streamHeaders = (headers: Record<string, unknown>) => {
    assert.equal(headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(headers['x-content-type-options'], 'nosniff');
    assert.equal(headers['access-control-allow-origin'], '*');
  };

  it('202 with its headers; a missing collection is created without defaults', async () => {
    const response = await post(env, 'st-new:insertStream', ndjson([{ a: 1 }, { a: 2 }]));
    assert.equal(response.statusCode, 202);
    streamHeaders(response.headers);
    assert.deepEqual(parseLines(response.body), [{ a: 1 }, { a: 2 }]);
    assert.deepEqual(jsonOf(await get(env, 'st-new')), { name: 'st-new', total: 2, indexes: 0, defaults: null });
    const empty = await post(env, 'st-new:insertStream', '');
    assert.equal(empty.statusCode, 202);
    streamHeaders(empty.headers);
    assert.equal(empty.body, '');
  });

  it('per-document errors are JSON-string lines and processing continues', async () => {
    await seed(env, 'st-errors', [{ id: 'a' }]);
    await createIndex(env, 'st-errors', { name: 'by-id', type: 'map', field: 'id' });
    const response = await post(
      env,
      'st-errors:insertStream',
      '{"id":"b"}\n{"id":"a"}\n[1]\nnull\n{"id":"c"}\n{"nothing":1}\n{"id":"d"}',
    );
    assert.equal(response.statusCode, 202);
    streamHeaders(response.headers);
    const lines = parseLines(response.body);
    assert.deepEqual(lines, [
      { id: 'b' },
      "index add 'by-id': index conflict: field 'id' with value 'a'",
      lines[2],
      lines[3],
      { id: 'c' },
      "index add 'by-id': field `id` is indexed and mandatory",
      { id: 'd' },
    ]);
    assert.equal(typeof lines[2], 'string');
    assert.equal(typeof lines[3], 'string');
    assert.deepEqual(ids(await all('st-errors')), ['a', 'b', 'c', 'd']);
  });

  it('a malformed value ends the stream with a JSON-string line', async () => {
    await seed(env, 'st-parse', []);
    const response = await post(env, 'st-parse:insertStream', '{"n":1}\n{"n":2}\n{"n":\n{"n":4}');
    assert.equal(response.statusCode, 202);
    const lines = parseLines(response.body);
    assert.deepEqual(lines.slice(0, 2), [{ n: 1 }, { n: 2 }]);
    assert.equal(lines.length, 3);
    assert.equal(typeof lines[2], 'string');
    assert.deepEqual(await all('st-parse'), [{ n: 1 }, { n: 2 }]);
    const first = await post(env, 'st-parse:insertStream', 'garbage');
    assert.equal(first.statusCode, 202);
    assert.equal(parseLines(first.body).length, 1);
    assert.equal(typeof parseLines(first.body)[0], 'string');
  });

  it('a document over 10 MiB ends the stream with a JSON-string line', async () => {
    const huge = JSON.stringify({ blob: 'x'.repeat(10 * 1024 * 1024 + 10) });
    const response = await post(env, 'st-huge:insertStream', `{"id":"small"}\n${huge}\n{"id":"after"}`);
    assert.equal(response.statusCode, 202);
    const lines = parseLines(response.body);
    assert.deepEqual(lines[0], { id: 'small' });
    assert.equal(typeof lines[1], 'string');
  });
});

describe('defaults and generators (§10)', () => {
  it('applies defaults where the value is missing or null; keeps "", false, 0, [], {}', async () => {
    jsonOf(
      await post(env, '', {
        name: 'def-apply',
        defaults: { s: 'dflt', b: true, n: 5, a: [1], o: { k: 'v' }, z: null },
      }),
      201,
    );
    const [kept, filled] = await insert(env, 'def-apply', [
      { s: '', b: false, n: 0, a: [], o: {}, z: 0 },
      { s: null, b: null },
    ]);
    assert.deepEqual(kept, { s: '', b: false, n: 0, a: [], o: {}, z: 0 });
    assert.deepEqual(filled, { s: 'dflt', b: true, n: 5, a: [1], o: { k: 'v' }, z: null });
    // Object defaults are copies: patching one document's copy changes no other document.
    await insert(env, 'def-apply', [{ id: 'x' }, { id: 'y' }]);
    linesOf(await post(env, 'def-apply:patch', { filter: { id: 'x' }, patch: { o: { k: 'changed' }, a: [9] } }));
    const [y] = await find(env, 'def-apply', { filter: { id: 'y' } });
    assert.deepEqual(y!.o, { k: 'v' });
    assert.deepEqual(y!.a, [1]);
    const [next] = await insert(env, 'def-apply', [{}]);
    assert.deepEqual(next!.o, { k: 'v' });
  });

  it('uuid() gives distinct lowercase v4 ids, stored (reading never re-runs a generator)', async () => {
    jsonOf(await post(env, '', { name: 'def-uuid', defaults: { id: 'uuid()', other: 'uuid()' } }), 201);
    const lines = await insert(env, 'def-uuid', [{}, {}, {}]);
    const seen = new Set<string>();
    for (const line of lines) {
      for (const key of ['id', 'other']) {
        assert.match(line[key] as string, UUID_V4);
        seen.add(line[key] as string);
      }
    }
    assert.equal(seen.size, 6);
    assert.deepEqual(await all('def-uuid'), lines);
    assert.deepEqual(await all('def-uuid'), lines);
  });

  it('unixnano() is an exact 19-digit integer, returned exactly and never decreasing', async () => {
    jsonOf(await post(env, '', { name: 'def-nano', defaults: { t: 'unixnano()' } }), 201);
    const before = BigInt(Date.now() - 1000) * 1_000_000n;
    const response = await post(env, 'def-nano:insert', ndjson([{ i: 1 }, { i: 2 }, { i: 3, t: 42 }]));
    assert.equal(response.statusCode, 201);
    const texts = response.body.split('\n').filter(Boolean);
    const nanos = texts.slice(0, 2).map((text) => {
      const match = /"t":(\d+)\}$/.exec(text);
      assert.ok(match, text);
      assert.equal(match[1]!.length, 19);
      return BigInt(match[1]!);
    });
    assert.ok(nanos[0]! >= before && nanos[0]! <= BigInt(Date.now() + 1000) * 1_000_000n);
    assert.ok(nanos[1]! >= nanos[0]!);
    assert.equal(texts[2], '{"i":3,"t":42}');
    // Exactly the same digits on the way out, through find and by id.
    const found = await post(env, 'def-nano:find', { limit: 2 });
    assert.equal(found.body, `${texts[0]}\n${texts[1]}\n`);
    // And through a patch (other fields change, t is kept exactly).
    const patched = await post(env, 'def-nano:patch', { filter: { i: 1 }, patch: { p: true } });
    assert.ok(patched.body.includes(`"t":${nanos[0]!.toString()}`), patched.body);
    // A filter can compare it exactly.
    const exact = await post(env, 'def-nano:find', { filter: { t: { $ge: Number(nanos[0]!) - 1e6 } }, limit: -1 });
    assert.equal(parseLines(exact.body).length, 2);
  });

  it('auto(): the four-inserts example', async () => {
    jsonOf(await post(env, '', { name: 'def-auto' }), 201);
    assert.deepEqual(jsonOf(await post(env, 'def-auto:setDefaults', { id: null, n: 'auto()' })), { n: 'auto()' });
    const lines = [];
    for (let i = 0; i < 4; i++) lines.push(...(await insert(env, 'def-auto', [{}])));
    assert.deepEqual(lines, [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
    // All auto() fields of one document get the same number; a present value is kept but still counts.
    jsonOf(await post(env, 'def-auto:setDefaults', { m: 'auto()' }));
    assert.deepEqual(await insert(env, 'def-auto', [{}, { n: 'mine' }, {}]), [
      { n: 5, m: 5 },
      { n: 'mine', m: 6 },
      { n: 7, m: 7 },
    ]);
  });

  it('auto(): every attempted document counts (rejected ones and ones without auto() defaults)', async () => {
    jsonOf(await post(env, '', { name: 'def-gaps', defaults: { n: 'auto()' } }), 201);
    await createIndex(env, 'def-gaps', { name: 'by-k', type: 'map', field: 'k' });
    assert.deepEqual(await insert(env, 'def-gaps', [{ k: 'a' }]), [{ k: 'a', n: 1 }]);
    errorOf(await post(env, 'def-gaps:insert', '{"k":"a"}'), 409, 'conflict');
    const stream = parseLines(
      (await post(env, 'def-gaps:insertStream', ndjson([{ k: 'b' }, { k: 'a' }, { k: 'c' }]))).body,
    );
    assert.deepEqual(stream[0], { k: 'b', n: 3 });
    assert.equal(typeof stream[1], 'string');
    assert.deepEqual(stream[2], { k: 'c', n: 5 });
    const later = linesOf(await post(env, 'def-gaps:insert', ndjson([{ k: 'd' }, { k: 'a' }])), 201);
    assert.deepEqual(later[0], { k: 'd', n: 6 });
    // Without an auto() default the counter still moves.
    jsonOf(await post(env, 'def-gaps:setDefaults', { n: null }));
    await insert(env, 'def-gaps', [{ k: 'e' }, { k: 'f' }]);
    jsonOf(await post(env, 'def-gaps:setDefaults', { n: 'auto()' }));
    assert.deepEqual(await insert(env, 'def-gaps', [{ k: 'g' }]), [{ k: 'g', n: 10 }]);
  });

  it('auto() is persisted: another instance on the same store continues the counter', async () => {
    jsonOf(await post(env, '', { name: 'def-persist', defaults: { n: 'auto()' } }), 201);
    await insert(env, 'def-persist', [{}, {}]);
    const second = await docdbService.build({
      settings: env.service.settings,
      store: env.service.store,
      logger: pino({ level: 'silent' }),
      version: VERSION,
    });
    try {
      await second.ready();
      const response = await second.inject({
        method: 'POST',
        url: `${env.C}/def-persist:insert`,
        headers: env.headers,
        payload: '{}',
      });
      assert.equal(response.statusCode, 201, response.body);
      assert.deepEqual(JSON.parse(response.body), { n: 3 });
    } finally {
      await second.close();
    }
    assert.deepEqual(await insert(env, 'def-persist', [{}]), [{ n: 4 }]);
  });

  it('auto() under concurrent inserts: every number once; generators only at the top level', async () => {
    jsonOf(
      await post(env, '', {
        name: 'def-concurrent',
        defaults: { n: 'auto()', o: { inner: 'uuid()' }, list: ['auto()'] },
      }),
      201,
    );
    const bodies = Array.from({ length: 4 }, (_, k) =>
      Array.from({ length: 150 }, (_, i) => `{"k":${k},"i":${i}}`).join('\n'),
    );
    const responses = await Promise.all(bodies.map((body) => post(env, 'def-concurrent:insert', body)));
    const numbers = responses.flatMap((response) => linesOf(response, 201).map((line) => line.n as number));
    assert.deepEqual(
      [...numbers].sort((a, b) => a - b),
      Array.from({ length: 600 }, (_, i) => i + 1),
    );
    const [first] = await find(env, 'def-concurrent');
    assert.deepEqual(first!.o, { inner: 'uuid()' });
    assert.deepEqual(first!.list, ['auto()']);
    // Each request's own documents keep their order.
    for (const response of responses) {
      const lines = linesOf(response, 201);
      assert.deepEqual(
        lines.map((line) => line.i),
        Array.from({ length: 150 }, (_, i) => i),
      );
      const ns = lines.map((line) => line.n as number);
      assert.deepEqual(
        ns,
        [...ns].sort((a, b) => a - b),
      );
    }
  });

  it('patch never applies defaults', async () => {
    jsonOf(await post(env, '', { name: 'def-patch', defaults: { status: 'new', n: 'auto()' } }), 201);
    await insert(env, 'def-patch', [{ id: 'a' }]);
    const [patched] = linesOf(await post(env, 'def-patch:patch', { patch: { status: null, n: null } }));
    assert.deepEqual(patched, { id: 'a' });
    assert.deepEqual(await all('def-patch'), [{ id: 'a' }]);
  });
});

describe('big integers (§1.3)', () => {
  it('client integers above 2^53 are stored and returned exactly', async () => {
    await seed(env, 'big', []);
    const text =
      '{"id":"b","x":9007199254740993,"neg":-123456789012345678901234567890,"arr":[18446744073709551616,1],"nested":{"y":9007199254740993},"f":1.5}';
    const response = await post(env, 'big:insert', text);
    assert.equal(response.statusCode, 201);
    assert.equal(response.body, `${text}\n`);
    assert.equal((await post(env, 'big:find', {})).body, `${text}\n`);
    const byId = await get(env, 'big/documents/b');
    assert.equal(byId.statusCode, 200);
    assert.ok(byId.body.includes('"x":9007199254740993'), byId.body);
    assert.ok(byId.body.includes('"neg":-123456789012345678901234567890'), byId.body);
    // Filters compare them exactly: 2^53+1 is not 2^53.
    assert.equal((await post(env, 'big:find', { filter: { x: 9007199254740992 } })).body, '');
    assert.equal((await post(env, 'big:find', '{"filter":{"x":9007199254740993}}')).body, `${text}\n`);
    assert.equal((await post(env, 'big:find', '{"filter":{"x":{"$gt":9007199254740992}}}')).body, `${text}\n`);
    assert.equal((await post(env, 'big:find', '{"filter":{"arr":18446744073709551616}}')).body, `${text}\n`);
    // Patches keep them and can write new ones.
    const patched = await post(env, 'big:patch', '{"patch":{"z":123456789012345678901}}');
    assert.equal(patched.body, `${text.slice(0, -1)},"z":123456789012345678901}\n`);
  });

  it('big integers order exactly in a btree index', async () => {
    await seed(env, 'big-order', []);
    const body =
      '{"id":"c","v":9007199254740995}\n{"id":"a","v":9007199254740993}\n{"id":"b","v":9007199254740994}\n{"id":"d","v":9007199254740992}';
    assert.equal((await post(env, 'big-order:insert', body)).statusCode, 201);
    await createIndex(env, 'big-order', { name: 'bt', type: 'btree', fields: ['v'], unique: true });
    assert.deepEqual(ids(await find(env, 'big-order', { index: 'bt', limit: -1 })), ['d', 'a', 'b', 'c']);
    const from = await post(env, 'big-order:find', '{"index":"bt","from":{"v":9007199254740994},"limit":-1}');
    assert.deepEqual(ids(parseLines(from.body) as Record<string, unknown>[]), ['b', 'c']);
    errorOf(await post(env, 'big-order:insert', '{"id":"e","v":9007199254740993}'), 409, 'conflict');
    assert.equal(
      (await post(env, 'big-order:insert', '{"id":"e","v":9007199254740993.5}')).statusCode,
      409,
      '9007199254740993.5 is the double 9007199254740994',
    );
  });
});

describe(':patch (§6.5, §11)', () => {
  it('the §11 merge example', async () => {
    await seed(env, 'patch-merge', [{ id: 'a', tags: ['red'], address: { city: 'Madrid', zip: '28001' } }]);
    const [patched] = linesOf(
      await post(env, 'patch-merge:patch', { patch: { address: { zip: null, country: 'ES' }, tags: ['x'] } }),
    );
    assert.deepEqual(patched, { id: 'a', tags: ['x'], address: { city: 'Madrid', country: 'ES' } });
    assert.deepEqual(await all('patch-merge'), [patched]);
  });

  it('merge rules: objects recursive (non-objects replaced by {}), null deletes, arrays and scalars replace', async () => {
    await seed(env, 'patch-rules', [{ id: 'a', s: 'x', n: 1, o: { deep: { k: 1, j: 2 } }, notObj: 5, arr: [1, 2] }]);
    const [patched] = linesOf(
      await post(env, 'patch-rules:patch', {
        patch: {
          s: 2,
          n: 'one',
          o: { deep: { k: null, m: [] } },
          notObj: { a: 1, gone: null },
          arr: { x: 1 },
          absent: null,
          added: { q: null, r: 1 },
        },
      }),
    );
    assert.deepEqual(patched, {
      id: 'a',
      s: 2,
      n: 'one',
      o: { deep: { j: 2, m: [] } },
      notObj: { a: 1 },
      arr: { x: 1 },
      added: { r: 1 },
    });
    // Existing members keep their positions; new members are appended.
    assert.deepEqual(Object.keys(patched!), ['id', 's', 'n', 'o', 'notObj', 'arr', 'added']);
  });

  it('default limit 1, limit -1 for all, filter, skip; the document keeps its position', async () => {
    await seed(env, 'patch-limit', [
      { id: '1', g: 'x' },
      { id: '2', g: 'y' },
      { id: '3', g: 'x' },
      { id: '4', g: 'x' },
    ]);
    assert.deepEqual(linesOf(await post(env, 'patch-limit:patch', { patch: { p: 1 } })), [{ id: '1', g: 'x', p: 1 }]);
    assert.deepEqual(
      linesOf(await post(env, 'patch-limit:patch', { filter: { g: 'x' }, skip: 1, limit: -1, patch: { p: 2 } })),
      [
        { id: '3', g: 'x', p: 2 },
        { id: '4', g: 'x', p: 2 },
      ],
    );
    assert.equal((await post(env, 'patch-limit:patch', { limit: 0, patch: { p: 3 } })).body, '');
    assert.equal((await post(env, 'patch-limit:patch', { filter: { g: 'none' }, patch: { p: 3 } })).body, '');
    assert.deepEqual(ids(await all('patch-limit')), ['1', '2', '3', '4']);
    assert.deepEqual(
      (await all('patch-limit')).map((d) => d.p),
      [1, undefined, 2, 2],
    );
  });

  it('a document that does not change is still reported', async () => {
    await seed(env, 'patch-same', [
      { id: 'a', v: 1, o: { k: 'x' } },
      { id: 'b', v: 2 },
    ]);
    const lines = linesOf(
      await post(env, 'patch-same:patch', { limit: -1, patch: { v: 1, o: { k: 'x' }, missing: null } }),
    );
    const sizeBefore = jsonOf<{ memory: number }>(await post(env, 'patch-same:size')).memory;
    assert.deepEqual(lines, [
      { id: 'a', v: 1, o: { k: 'x' } },
      { id: 'b', v: 1, o: { k: 'x' } },
    ]);
    assert.deepEqual(linesOf(await post(env, 'patch-same:patch', { patch: {} })), [{ id: 'a', v: 1, o: { k: 'x' } }]);
    assert.deepEqual(linesOf(await post(env, 'patch-same:patch', { limit: -1, patch: { o: { k: 'x' } } })), lines);
    assert.equal(jsonOf<{ memory: number }>(await post(env, 'patch-same:size')).memory, sizeBefore);
  });

  it('an index conflict on the first document → 409 and the document is unchanged', async () => {
    await seed(env, 'patch-atomic', [
      { id: 'a', email: 'a@x' },
      { id: 'b', email: 'b@x', tags: ['t1'] },
    ]);
    await createIndex(env, 'patch-atomic', { name: 'by-email', type: 'map', field: 'email' });
    await createIndex(env, 'patch-atomic', { name: 'by-tag', type: 'map', field: 'tags', sparse: true, unique: false });
    await createIndex(env, 'patch-atomic', { name: 'bt', type: 'btree', fields: ['id'] });
    const message = errorOf(
      await post(env, 'patch-atomic:patch', { filter: { id: 'b' }, patch: { email: 'a@x', tags: ['t2'], other: 1 } }),
      409,
      'conflict',
    );
    assert.equal(message, "index add 'by-email': index conflict: field 'email' with value 'a@x'");
    assert.deepEqual(await find(env, 'patch-atomic', { filter: { id: 'b' } }), [
      { id: 'b', email: 'b@x', tags: ['t1'] },
    ]);
    assert.deepEqual(ids(await find(env, 'patch-atomic', { index: 'by-email', value: 'b@x' })), ['b']);
    assert.deepEqual(ids(await find(env, 'patch-atomic', { index: 'by-email', value: 'a@x', limit: -1 })), ['a']);
    assert.deepEqual(ids(await find(env, 'patch-atomic', { index: 'by-tag', value: 't1' })), ['b']);
    assert.deepEqual(await find(env, 'patch-atomic', { index: 'by-tag', value: 't2' }), []);
    assert.deepEqual(ids(await find(env, 'patch-atomic', { index: 'bt', limit: -1 })), ['a', 'b']);
    // Missing mandatory field and unsupported values are rejected the same way.
    assert.equal(
      errorOf(await post(env, 'patch-atomic:patch', { filter: { id: 'b' }, patch: { email: null } }), 409, 'conflict'),
      "index add 'by-email': field `email` is indexed and mandatory",
    );
    assert.equal(
      errorOf(await post(env, 'patch-atomic:patch', { filter: { id: 'b' }, patch: { email: 5 } }), 409, 'conflict'),
      "index add 'by-email': type not supported",
    );
    assert.equal(
      errorOf(
        await post(env, 'patch-atomic:patch', { filter: { id: 'b' }, patch: { tags: ['ok', 1] } }),
        409,
        'conflict',
      ),
      "index add 'by-tag': type not supported",
    );
    assert.equal(
      errorOf(await post(env, 'patch-atomic:patch', { filter: { id: 'b' }, patch: { id: null } }), 409, 'conflict'),
      "index add 'bt': field 'id' not defined",
    );
    assert.deepEqual(await find(env, 'patch-atomic', { filter: { id: 'b' } }), [
      { id: 'b', email: 'b@x', tags: ['t1'] },
    ]);
    // A successful patch re-keys the document.
    linesOf(
      await post(env, 'patch-atomic:patch', { filter: { id: 'b' }, patch: { email: 'c@x', tags: ['t2', 't3'] } }),
    );
    assert.deepEqual(await find(env, 'patch-atomic', { index: 'by-email', value: 'b@x' }), []);
    assert.deepEqual(ids(await find(env, 'patch-atomic', { index: 'by-email', value: 'c@x' })), ['b']);
    assert.deepEqual(await find(env, 'patch-atomic', { index: 'by-tag', value: 't1' }), []);
    assert.deepEqual(ids(await find(env, 'patch-atomic', { index: 'by-tag', value: 't3' })), ['b']);
    // The freed key is usable again.
    await insert(env, 'patch-atomic', [{ id: 'c', email: 'b@x' }]);
  });

  it('a conflict after the first line: an error line, the earlier documents stay patched', async () => {
    await seed(env, 'patch-later', [
      { id: 'a', k: 'a' },
      { id: 'b', k: 'b' },
      { id: 'c', k: 'c' },
    ]);
    await createIndex(env, 'patch-later', { name: 'by-k', type: 'map', field: 'k' });
    const lines = linesOf(await post(env, 'patch-later:patch', { limit: -1, patch: { k: 'same' } }));
    assert.deepEqual(lines[0], { id: 'a', k: 'same' });
    assert.equal(errorLine(lines[1], 409, 'conflict'), "index add 'by-k': index conflict: field 'k' with value 'same'");
    assert.equal(lines.length, 2);
    assert.deepEqual(await all('patch-later'), [
      { id: 'a', k: 'same' },
      { id: 'b', k: 'b' },
      { id: 'c', k: 'c' },
    ]);
  });

  it('a document may patch its own unique key to the same value or swap multi-keys', async () => {
    await seed(env, 'patch-self', [{ id: 'a', tags: ['x', 'y'] }]);
    await createIndex(env, 'patch-self', { name: 'by-tag', type: 'map', field: 'tags' });
    assert.deepEqual(linesOf(await post(env, 'patch-self:patch', { patch: { tags: ['y', 'x', 'x'] } })), [
      { id: 'a', tags: ['y', 'x', 'x'] },
    ]);
    assert.deepEqual(ids(await find(env, 'patch-self', { index: 'by-tag', value: 'x' })), ['a']);
  });

  it('every selected document is patched exactly once, even when the patch moves it in the index', async () => {
    const documents = Array.from({ length: 30 }, (_, i) => ({ id: `d${i}`, n: i }));
    await seed(env, 'patch-move', documents);
    await createIndex(env, 'patch-move', { name: 'by-n', type: 'btree', fields: ['n'] });
    const lines = linesOf(await post(env, 'patch-move:patch', { index: 'by-n', limit: -1, patch: { n: 1000 } }));
    assert.equal(lines.length, 30);
    assert.deepEqual(
      ids(lines),
      documents.map((d) => d.id),
    );
    const reversed = linesOf(
      await post(env, 'patch-move:patch', { index: 'by-n', reverse: true, limit: -1, patch: { n: -1 } }),
    );
    assert.equal(reversed.length, 30);
    assert.deepEqual(ids(reversed), documents.map((d) => d.id).reverse());
    // Documents inserted while a patch runs are not selected by it; here: none were.
    assert.equal(await total('patch-move'), 30);
  });

  it('a patched document over 10 MiB is refused like an insert (413 first, error line later) and left as it was', async () => {
    await seed(env, 'patch-huge', [{ id: 'small' }, { id: 'big', blob: 'b'.repeat(6 * 1024 * 1024) }]);
    const grow = { patch: { more: 'm'.repeat(5 * 1024 * 1024) } };
    errorOf(await post(env, 'patch-huge:patch', { ...grow, filter: { id: 'big' } }), 413, 'payload_too_large');
    const lines = linesOf(await post(env, 'patch-huge:patch', { ...grow, limit: -1 }));
    assert.equal(lines[0]!.id, 'small');
    errorLine(lines[1], 413, 'payload_too_large');
    assert.equal(lines.length, 2);
    const [big] = await find(env, 'patch-huge', { filter: { id: 'big' } });
    assert.deepEqual(Object.keys(big!), ['id', 'blob']);
  });

  it('rejects bad bodies before changing anything', async () => {
    await seed(env, 'patch-bad', [{ id: 'a' }]);
    errorOf(await post(env, 'patch-bad:patch', {}), 400, 'validation_error');
    errorOf(await post(env, 'patch-bad:patch', { patch: null }), 400, 'validation_error');
    errorOf(await post(env, 'patch-bad:patch', { patch: [1] }), 400, 'validation_error');
    errorOf(await post(env, 'patch-bad:patch', { patch: 'x' }), 400, 'validation_error');
    errorOf(await post(env, 'patch-bad:patch', ''), 400, 'invalid_json');
    errorOf(await post(env, 'patch-bad:patch', '{"patch":'), 400, 'invalid_json');
    errorOf(await post(env, 'patch-bad:patch', '[]'), 400, 'validation_error');
    errorOf(await post(env, 'patch-bad:patch', { patch: { x: 1 }, filter: { $bad: 1 } }), 400, 'invalid_filter');
    errorOf(await post(env, 'patch-bad:patch', { patch: { x: 1 }, limit: '2' }), 400, 'validation_error');
    errorOf(await post(env, 'patch-bad:patch', { patch: { x: 1 }, index: 'nope' }), 404, 'not_found');
    errorOf(await post(env, 'patch-missing:patch', { patch: { x: 1 } }), 404, 'not_found');
    errorOf(await get(env, 'patch-missing'), 404, 'not_found');
    assert.deepEqual(await all('patch-bad'), [{ id: 'a' }]);
  });
});

describe(':remove (§6.6)', () => {
  it('removes the selected documents (limit 1 by default) and keeps the others in order', async () => {
    await seed(
      env,
      'rm',
      ['a', 'b', 'c', 'd', 'e', 'f'].map((id, i) => ({ id, i })),
    );
    assert.deepEqual(linesOf(await post(env, 'rm:remove', {})), [{ id: 'a', i: 0 }]);
    assert.deepEqual(linesOf(await post(env, 'rm:remove', { filter: { id: 'c' } })), [{ id: 'c', i: 2 }]);
    assert.deepEqual(ids(await all('rm')), ['b', 'd', 'e', 'f']);
    // Inserting after a removal appends; the rest stay where they were.
    await insert(env, 'rm', [{ id: 'g' }]);
    assert.deepEqual(ids(await all('rm')), ['b', 'd', 'e', 'f', 'g']);
    assert.deepEqual(ids(linesOf(await post(env, 'rm:remove', { skip: 1, limit: 2 }))), ['d', 'e']);
    assert.deepEqual(ids(await all('rm')), ['b', 'f', 'g']);
    assert.equal((await post(env, 'rm:remove', { filter: { id: 'zzz' } })).body, '');
    assert.equal((await post(env, 'rm:remove', { limit: 0 })).body, '');
    assert.equal(await total('rm'), 3);
    assert.deepEqual(ids(linesOf(await post(env, 'rm:remove', { limit: -1 }))), ['b', 'f', 'g']);
    assert.equal(await total('rm'), 0);
    assert.equal((await post(env, 'rm:remove', { limit: -1 })).body, '');
  });

  it('returns documents as stored and removes their index entries', async () => {
    await seed(env, 'rm-index', [
      { id: 'a', tags: ['x', 'y'], n: 2 },
      { id: 'b', tags: ['z'], n: 1 },
    ]);
    await createIndex(env, 'rm-index', { name: 'by-tag', type: 'map', field: 'tags' });
    await createIndex(env, 'rm-index', { name: 'by-n', type: 'btree', fields: ['-n'], unique: true });
    assert.deepEqual(linesOf(await post(env, 'rm-index:remove', { index: 'by-tag', value: 'y' })), [
      { id: 'a', tags: ['x', 'y'], n: 2 },
    ]);
    assert.deepEqual(await find(env, 'rm-index', { index: 'by-tag', value: 'x' }), []);
    assert.deepEqual(ids(await find(env, 'rm-index', { index: 'by-n', limit: -1 })), ['b']);
    await insert(env, 'rm-index', [{ id: 'a2', tags: ['x', 'y'], n: 2 }]);
    assert.deepEqual(ids(await find(env, 'rm-index', { index: 'by-n', limit: -1 })), ['a2', 'b']);
    assert.deepEqual(ids(linesOf(await post(env, 'rm-index:remove', { index: 'by-n', reverse: true }))), ['b']);
    assert.deepEqual(ids(await all('rm-index')), ['a2']);
  });

  it('rejects bad bodies and unknown collections, removing nothing', async () => {
    await seed(env, 'rm-bad', [{ id: 'a' }]);
    errorOf(await post(env, 'rm-bad:remove', ''), 400, 'invalid_json');
    errorOf(await post(env, 'rm-bad:remove', '"x"'), 400, 'validation_error');
    errorOf(await post(env, 'rm-bad:remove', { filter: { a: { $nope: 1 } } }), 400, 'invalid_filter');
    errorOf(await post(env, 'rm-bad:remove', { skip: 1.5 }), 400, 'validation_error');
    errorOf(await post(env, 'rm-bad:remove', { index: 'nope' }), 404, 'not_found');
    errorOf(await post(env, 'rm-missing:remove', {}), 404, 'not_found');
    assert.deepEqual(await all('rm-bad'), [{ id: 'a' }]);
  });
});

describe('GET $C/{collection}/documents/{id} (§6.7)', () => {
  it('through the first map index on `id`, then a full scan', async () => {
    await seed(env, 'byid', [
      { id: 'a', v: 1 },
      { id: 'b', v: 2 },
      { id: ' spaced ', v: 3 },
    ]);
    await createIndex(env, 'byid', { name: 'other', type: 'map', field: 'name', sparse: true });
    await createIndex(env, 'byid', { name: 'ids', type: 'map', field: 'id' });
    await createIndex(env, 'byid', { name: 'ids2', type: 'map', field: 'id' });
    const hit = jsonOf(await get(env, 'byid/documents/b'));
    assert.deepEqual(hit, { id: 'b', document: { id: 'b', v: 2 }, source: { type: 'index', name: 'ids' } });
    // The requested id is trimmed; the index misses " spaced " but the full scan trims the stored id.
    const spaced = jsonOf(await get(env, 'byid/documents/%20spaced%20'));
    assert.deepEqual(spaced, { id: 'spaced', document: { id: ' spaced ', v: 3 }, source: { type: 'fullscan' } });
    assert.equal(errorOf(await get(env, 'byid/documents/zz'), 404, 'not_found'), "document 'zz' not found");
    assert.equal(errorOf(await get(env, 'byid/documents/%20%20'), 400, 'validation_error'), 'document id is required');
    errorOf(await get(env, 'nothing-here/documents/a'), 404, 'not_found');
  });

  it('a full scan matches numbers by their shortest JSON form', async () => {
    await seed(env, 'byid-scan', [
      { id: 7, v: 'seven' },
      { id: 1.5, v: 'one and a half' },
      { id: 1e21, v: 'big' },
      { id: true, v: 'bool' },
      { v: 'no id' },
      { id: 'a/b', v: 'slash' },
      { id: 'x', v: 'first x' },
      { id: 'x', v: 'second x' },
    ]);
    const cases: [string, unknown][] = [
      ['7', 'seven'],
      ['1.5', 'one and a half'],
      ['1e%2B21', 'big'],
      ['a%2Fb', 'slash'],
      ['x', 'first x'],
    ];
    for (const [id, v] of cases) {
      const found = jsonOf<{ id: string; document: { v: unknown }; source: unknown }>(
        await get(env, `byid-scan/documents/${id}`),
      );
      assert.equal(found.document.v, v);
      assert.equal(found.id, decodeURIComponent(id));
      assert.deepEqual(found.source, { type: 'fullscan' });
    }
    for (const id of ['7.0', 'true', '1.50', 'null', '1000000000000000000000'])
      errorOf(await get(env, `byid-scan/documents/${id}`), 404, 'not_found');
  });
});
