// Collection endpoints (docdb.md §5) and action routing (§1.1), on SQLite or PostgreSQL.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createIndex, errorOf, find, get, insert, jsonOf, post, request, useEnv } from './fixtures.ts';

const env = useEnv();

interface CollectionRecord {
  name: string;
  total: number;
  indexes: number;
  defaults: Record<string, unknown> | null;
}

describe('GET/POST $C', () => {
  it('lists collections in creation order; [] on a fresh database', async () => {
    const fresh = jsonOf<{ id: string }>(await request(env, 'POST', '/v1/databases', { name: 'empty' }), 201);
    const list = await request(env, 'GET', `/v1/databases/${fresh.id}/collections`);
    assert.deepEqual(jsonOf(list), []);
    assert.equal(list.body, '[]\n');

    for (const name of ['zeta', 'alpha', 'mid'])
      jsonOf(await request(env, 'POST', `/v1/databases/${fresh.id}/collections`, { name }), 201);
    const names = jsonOf<CollectionRecord[]>(await request(env, 'GET', `/v1/databases/${fresh.id}/collections`)).map(
      (c) => c.name,
    );
    assert.deepEqual(names, ['zeta', 'alpha', 'mid']);
  });

  it('creates with the defaults rules: missing or null → {"id":"uuid()"}; an object as given, {} and null members kept', async () => {
    const cases: [string, Record<string, unknown>, Record<string, unknown> | null][] = [
      ['d-missing', {}, { id: 'uuid()' }],
      ['d-null', { defaults: null }, { id: 'uuid()' }],
      ['d-empty', { defaults: {} }, {}],
      [
        'd-object',
        { defaults: { status: 'new', gone: null, n: 'auto()', nested: { a: [1, 2] } } },
        { status: 'new', gone: null, n: 'auto()', nested: { a: [1, 2] } },
      ],
    ];
    for (const [name, extra, defaults] of cases) {
      const created = jsonOf<CollectionRecord>(await post(env, '', { name, ...extra }), 201);
      assert.deepEqual(created, { name, total: 0, indexes: 0, defaults });
      assert.deepEqual(jsonOf(await get(env, name)), created);
    }
    // A null default member is kept and applied (adds a null member to documents missing it).
    const [stored] = await insert(env, 'd-object', [{ id: 'x' }]);
    assert.deepEqual(stored, { id: 'x', status: 'new', gone: null, n: 1, nested: { a: [1, 2] } });
    // {} = no defaults: nothing is added.
    assert.deepEqual(await insert(env, 'd-empty', [{ a: 1 }]), [{ a: 1 }]);
  });

  it('ignores unknown fields and accepts any content type', async () => {
    jsonOf(await post(env, '', { name: 'ct-json', extra: true }), 201);
    jsonOf(await post(env, '', JSON.stringify({ name: 'ct-ndjson' }), { 'content-type': 'application/x-ndjson' }), 201);
    jsonOf(await post(env, '', JSON.stringify({ name: 'ct-jsonl' }), { 'content-type': 'application/jsonl' }), 201);
    jsonOf(await post(env, '', JSON.stringify({ name: 'ct-text' }), { 'content-type': 'text/plain' }), 201);
    const none = await env.service.app.inject({
      method: 'POST',
      url: env.C,
      headers: env.headers,
      payload: JSON.stringify({ name: 'ct-none' }),
    });
    jsonOf(none, 201);
  });

  it('keeps integers above 2^53 in defaults given at creation exact', async () => {
    const big = '9007199254740993123';
    const created = await post(env, '', `{"name":"big-defaults","defaults":{"tenant":${big}}}`);
    assert.equal(created.statusCode, 201);
    assert.match(created.body, new RegExp(`"tenant":${big}[,}]`));
    assert.match((await get(env, 'big-defaults')).body, new RegExp(`"tenant":${big}[,}]`));
    const inserted = await post(env, 'big-defaults:insert', '{"id":"x"}');
    assert.match(inserted.body, new RegExp(`"tenant":${big}[,}]`));
  });

  it('409 when the name is taken (the first collection is unchanged)', async () => {
    jsonOf(await post(env, '', { name: 'taken', defaults: { a: 1 } }), 201);
    assert.equal(errorOf(await post(env, '', { name: 'taken' }), 409, 'conflict'), 'collection already exists');
    assert.deepEqual(jsonOf<CollectionRecord>(await get(env, 'taken')).defaults, { a: 1 });
  });

  it('validates the name: 1–255 characters, no `/`, no control characters', async () => {
    errorOf(await post(env, '', { name: '' }), 400, 'validation_error');
    errorOf(await post(env, '', { name: 'x'.repeat(256) }), 400, 'validation_error');
    // `.` and `..` are dot-segments to every URL client (even encoded): such names are refused.
    for (const bad of ['a/b', '/', 'tab\there', 'nl\n', 'nul\u0000', 'del\u007f', 'esc\u001b', '.', '..']) {
      errorOf(await post(env, '', { name: bad }), 400, 'validation_error');
    }
    const long = 'L'.repeat(255);
    jsonOf(await post(env, '', { name: long }), 201);
    assert.equal(jsonOf<CollectionRecord>(await get(env, long)).name, long);
    // Unicode, spaces, colons, plus signs and dots are fine.
    for (const name of ['ñandú 🦤', 'with space', 'a:b:c', 'a+b', '...', 'x.y', '.hidden']) {
      jsonOf(await post(env, '', { name }), 201);
      assert.equal(jsonOf<CollectionRecord>(await get(env, encodeURIComponent(name))).name, name);
    }
    const names = jsonOf<CollectionRecord[]>(await get(env, '')).map((c) => c.name);
    for (const bad of ['', 'a/b', 'tab\there']) assert.ok(!names.includes(bad));
  });

  it('rejects bad bodies: empty or malformed → invalid_json; wrong types → validation_error', async () => {
    errorOf(await post(env, '', ''), 400, 'invalid_json');
    errorOf(await post(env, '', '   \n'), 400, 'invalid_json');
    errorOf(await post(env, '', '{"name":'), 400, 'invalid_json');
    errorOf(await post(env, '', {}), 400, 'validation_error');
    errorOf(await post(env, '', { name: 7 }), 400, 'validation_error');
    errorOf(await post(env, '', { name: null }), 400, 'validation_error');
    errorOf(await post(env, '', { name: 'bad-defaults', defaults: [] }), 400, 'validation_error');
    errorOf(await post(env, '', { name: 'bad-defaults', defaults: 'uuid()' }), 400, 'validation_error');
    errorOf(await post(env, '', [{ name: 'arr' }]), 400, 'validation_error');
    errorOf(await get(env, 'bad-defaults'), 404, 'not_found');
  });
});

describe('GET $C/{collection}', () => {
  it('returns the record with live total and index counts; unknown → 404', async () => {
    jsonOf(await post(env, '', { name: 'counted' }), 201);
    await insert(env, 'counted', [{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
    await createIndex(env, 'counted', { name: 'by-id', type: 'map', field: 'id' });
    assert.deepEqual(jsonOf(await get(env, 'counted')), {
      name: 'counted',
      total: 3,
      indexes: 1,
      defaults: { id: 'uuid()' },
    });
    const listed = jsonOf<CollectionRecord[]>(await get(env, '')).find((c) => c.name === 'counted');
    assert.deepEqual(listed, { name: 'counted', total: 3, indexes: 1, defaults: { id: 'uuid()' } });
    assert.equal(errorOf(await get(env, 'nope'), 404, 'not_found'), 'collection not found');
  });

  it('unknown database → 404; collections of other databases are separate', async () => {
    errorOf(
      await request(env, 'GET', '/v1/databases/00000000-0000-4000-8000-000000000000/collections/x'),
      404,
      'not_found',
    );
    const other = jsonOf<{ id: string }>(await request(env, 'POST', '/v1/databases', { name: 'other' }), 201);
    jsonOf(await request(env, 'POST', `/v1/databases/${other.id}/collections`, { name: 'only-there' }), 201);
    errorOf(await get(env, 'only-there'), 404, 'not_found');
    jsonOf(await post(env, '', { name: 'only-there' }), 201);
  });
});

describe('action routing (§1.1)', () => {
  it('splits the raw last segment at its last colon when the suffix is an action', async () => {
    jsonOf(await post(env, '', { name: 'a:b', defaults: {} }), 201);
    assert.equal(jsonOf<CollectionRecord>(await get(env, 'a:b')).name, 'a:b');
    await insert(env, 'a:b', [{ k: 1 }, { k: 2 }]);
    assert.deepEqual(await find(env, 'a:b', { limit: -1 }), [{ k: 1 }, { k: 2 }]);
    // `a` does not exist: the action really ran on `a:b`.
    errorOf(await get(env, 'a'), 404, 'not_found');
    assert.equal(jsonOf<CollectionRecord>(await get(env, 'a:b')).total, 2);
    // Any number of colons.
    jsonOf(await post(env, '', { name: 'x:y:z' }), 201);
    assert.deepEqual(jsonOf(await post(env, 'x:y:z:size')), { memory: 0, disk: 0 });
    assert.equal(jsonOf<CollectionRecord>(await get(env, 'x:y:z')).name, 'x:y:z');
  });

  it('an encoded colon never splits', async () => {
    jsonOf(await post(env, '', { name: 'q:find', defaults: {} }), 201);
    // GET $C/q%3Afind reads the collection `q:find`; GET $C/q:find is find on `q` with GET → 405.
    assert.equal(jsonOf<CollectionRecord>(await get(env, 'q%3Afind')).name, 'q:find');
    const wrong = await get(env, 'q:find');
    errorOf(wrong, 405, 'method_not_allowed');
    assert.equal(wrong.headers.allow, 'POST');
    // POST $C/q%3Afind names the collection `q:find` with no action: 405.
    errorOf(await post(env, 'q%3Afind', {}), 405, 'method_not_allowed');
    // POST $C/q%3Afind:insert inserts into `q:find`.
    await insert(env, 'q%3Afind', [{ v: 1 }]);
    assert.deepEqual(await find(env, 'q%3Afind'), [{ v: 1 }]);
    errorOf(await get(env, 'q'), 404, 'not_found');
    // Also an encoded colon before a real action: `q%3Afind:find` is find on `q:find`.
    assert.deepEqual(await find(env, 'q%3Afind'), [{ v: 1 }]);
  });

  it('GET with an action → 405 Allow: POST; POST with an unknown verb → 405', async () => {
    jsonOf(await post(env, '', { name: 'c1' }), 201);
    for (const action of ['find', 'insert', 'size', 'dropCollection', 'createIndex']) {
      const response = await get(env, `c1:${action}`);
      errorOf(response, 405, 'method_not_allowed');
      assert.equal(response.headers.allow, 'POST');
    }
    const unknown = await post(env, 'c1:unknownVerb', {});
    errorOf(unknown, 405, 'method_not_allowed');
    assert.equal(unknown.headers.allow, 'GET');
    // A POST without any action is 405 too, and nothing is created.
    errorOf(await post(env, 'c1', {}), 405, 'method_not_allowed');
    errorOf(await get(env, 'c1:unknownVerb'), 404, 'not_found');
    // Actions are case-sensitive.
    errorOf(await post(env, 'c1:FIND', {}), 405, 'method_not_allowed');
  });

  it('other methods and unknown paths', async () => {
    errorOf(await request(env, 'DELETE', 'c1'), 405, 'method_not_allowed');
    errorOf(await request(env, 'PUT', 'c1', {}), 405, 'method_not_allowed');
    errorOf(await get(env, 'c1/nothing/here'), 404, 'not_found');
    errorOf(await post(env, 'c1/documents', {}), 404, 'not_found');
  });

  it('percent-decodes names; `+` stays a plus', async () => {
    jsonOf(await post(env, '', { name: 'p+q r' }), 201);
    assert.equal(jsonOf<CollectionRecord>(await get(env, 'p+q%20r')).name, 'p+q r');
    errorOf(await get(env, 'p%20q%20r'), 404, 'not_found');
    await insert(env, 'p+q%20r', [{ id: 'one' }]);
    assert.equal(jsonOf<CollectionRecord>(await get(env, 'p+q%20r')).total, 1);
    // Invalid percent-encoding is not a collection.
    const bad = await get(env, 'bad%zz');
    assert.ok(bad.statusCode === 404 || bad.statusCode === 400, bad.body);
  });
});

describe(':dropCollection', () => {
  it('204 with an empty body; the documents, indexes, defaults and auto() counter go with it', async () => {
    jsonOf(await post(env, '', { name: 'doomed', defaults: { n: 'auto()', keep: true } }), 201);
    await insert(env, 'doomed', [{ id: 'a' }, { id: 'b' }]);
    await createIndex(env, 'doomed', { name: 'by-id', type: 'map', field: 'id' });
    const dropped = await post(env, 'doomed:dropCollection');
    assert.equal(dropped.statusCode, 204);
    assert.equal(dropped.body, '');
    errorOf(await get(env, 'doomed'), 404, 'not_found');
    assert.ok(!jsonOf<CollectionRecord[]>(await get(env, '')).some((c) => c.name === 'doomed'));
    errorOf(await post(env, 'doomed:find', {}), 404, 'not_found');
    errorOf(await post(env, 'doomed:dropCollection'), 404, 'not_found');
    // Recreated by insert: default defaults, no indexes, no documents, a fresh counter.
    const [document] = await insert(env, 'doomed', [{ id: 'a' }]);
    assert.deepEqual(document, { id: 'a' });
    assert.deepEqual(jsonOf(await get(env, 'doomed')), {
      name: 'doomed',
      total: 1,
      indexes: 0,
      defaults: { id: 'uuid()' },
    });
    jsonOf(await post(env, 'doomed:setDefaults', { n: 'auto()' }));
    assert.deepEqual(await insert(env, 'doomed', [{ id: 'c' }]), [{ id: 'c', n: 2 }]);
  });

  it('404 for an unknown collection; a body is ignored', async () => {
    errorOf(await post(env, 'never:dropCollection'), 404, 'not_found');
    jsonOf(await post(env, '', { name: 'drop-with-body' }), 201);
    assert.equal((await post(env, 'drop-with-body:dropCollection', {})).statusCode, 204);
  });
});

describe(':setDefaults', () => {
  it('merges as in §5.5: add, overwrite, delete nulls, null when empty', async () => {
    jsonOf(await post(env, '', { name: 'defs' }), 201);
    assert.deepEqual(jsonOf(await post(env, 'defs:setDefaults', { status: 'active' })), {
      id: 'uuid()',
      status: 'active',
    });
    assert.deepEqual(jsonOf(await post(env, 'defs:setDefaults', { status: null })), { id: 'uuid()' });
    const cleared = await post(env, 'defs:setDefaults', { id: null });
    assert.equal(jsonOf(cleared), null);
    assert.equal(cleared.body, 'null\n');
    assert.equal(jsonOf<CollectionRecord>(await get(env, 'defs')).defaults, null);
    // From null: the body is merged into nothing.
    assert.deepEqual(jsonOf(await post(env, 'defs:setDefaults', { a: 1, b: null })), { a: 1 });
    // Overwrite and add in one go; other keys stay.
    assert.deepEqual(jsonOf(await post(env, 'defs:setDefaults', { a: 'x', c: [1] })), { a: 'x', c: [1] });
    assert.deepEqual(jsonOf(await post(env, 'defs:setDefaults', {})), { a: 'x', c: [1] });
    assert.deepEqual(jsonOf<CollectionRecord>(await get(env, 'defs')).defaults, { a: 'x', c: [1] });
    // The new defaults apply to the next inserts.
    assert.deepEqual(await insert(env, 'defs', [{ a: 'own' }, {}]), [
      { a: 'own', c: [1] },
      { a: 'x', c: [1] },
    ]);
  });

  it('creates a missing collection with {"id":"uuid()"} first and merges into it', async () => {
    assert.deepEqual(jsonOf(await post(env, 'made-by-defaults:setDefaults', { status: 'new' })), {
      id: 'uuid()',
      status: 'new',
    });
    assert.deepEqual(jsonOf(await get(env, 'made-by-defaults')), {
      name: 'made-by-defaults',
      total: 0,
      indexes: 0,
      defaults: { id: 'uuid()', status: 'new' },
    });
    assert.equal(jsonOf(await post(env, 'made-null:setDefaults', { id: null })), null);
    assert.deepEqual(jsonOf(await get(env, 'made-null')), { name: 'made-null', total: 0, indexes: 0, defaults: null });
  });

  it('keeps integers above 2^53 exact in defaults, in every answer that shows them', async () => {
    jsonOf(await post(env, '', { name: 'defs-big', defaults: {} }), 201);
    const set = await post(env, 'defs-big:setDefaults', '{"big":123456789012345678901234,"n":9007199254740993}');
    assert.equal(set.statusCode, 200, set.body);
    assert.equal(set.body, '{"big":123456789012345678901234,"n":9007199254740993}\n');
    const record = await get(env, 'defs-big');
    assert.equal(record.statusCode, 200, record.body);
    assert.equal(
      record.body,
      '{"name":"defs-big","total":0,"indexes":0,"defaults":{"big":123456789012345678901234,"n":9007199254740993}}\n',
    );
    const list = await get(env, '');
    assert.equal(list.statusCode, 200, list.body);
    assert.ok(list.body.includes('"defaults":{"big":123456789012345678901234,"n":9007199254740993}'), list.body);
    const inserted = await post(env, 'defs-big:insert', '{"id":"x"}');
    assert.equal(inserted.body, '{"id":"x","big":123456789012345678901234,"n":9007199254740993}\n');
  });

  it('on a collection created with {} defaults', async () => {
    jsonOf(await post(env, '', { name: 'defs-empty', defaults: {} }), 201);
    assert.deepEqual(jsonOf(await post(env, 'defs-empty:setDefaults', { n: 'auto()' })), { n: 'auto()' });
  });

  it('rejects non-object bodies (400) and changes nothing; invalid names are not created', async () => {
    jsonOf(await post(env, '', { name: 'defs-bad', defaults: { k: 1 } }), 201);
    errorOf(await post(env, 'defs-bad:setDefaults', ''), 400, 'invalid_json');
    errorOf(await post(env, 'defs-bad:setDefaults', '{"a":'), 400, 'invalid_json');
    for (const body of [[], 'null', '"x"', '3', 'true'])
      errorOf(await post(env, 'defs-bad:setDefaults', body), 400, 'validation_error');
    assert.deepEqual(jsonOf<CollectionRecord>(await get(env, 'defs-bad')).defaults, { k: 1 });
    errorOf(await post(env, 'defs-missing:setDefaults', []), 400, 'validation_error');
    errorOf(await get(env, 'defs-missing'), 404, 'not_found');
    errorOf(await post(env, `${'n'.repeat(256)}:setDefaults`, { a: 1 }), 400, 'validation_error');
    errorOf(await post(env, 'ctl%01:setDefaults', { a: 1 }), 400, 'validation_error');
    errorOf(await post(env, 'sl%2Fash:setDefaults', { a: 1 }), 400, 'validation_error');
  });
});

describe(':size', () => {
  it('memory, disk and one index.<name> key per index, all non-negative numbers', async () => {
    jsonOf(await post(env, '', { name: 'sized', defaults: {} }), 201);
    assert.deepEqual(jsonOf(await post(env, 'sized:size')), { memory: 0, disk: 0 });
    await insert(env, 'sized', [{ id: 'a', v: 'x'.repeat(100) }, { id: 'b' }]);
    await createIndex(env, 'sized', { name: 'by-id', type: 'map', field: 'id' });
    await createIndex(env, 'sized', { name: 'bt', type: 'btree', fields: ['id', '-v'], sparse: true });
    const size = jsonOf<Record<string, number>>(await post(env, 'sized:size'));
    assert.deepEqual(Object.keys(size).sort(), ['disk', 'index.bt', 'index.by-id', 'memory']);
    for (const value of Object.values(size)) assert.ok(Number.isFinite(value) && value >= 0);
    assert.ok(size.memory! >= 100, 'memory counts the stored JSON');
    assert.ok(size['index.by-id']! > 0);
    assert.ok(size.disk! >= size.memory!);
    // A body is ignored; removing everything brings memory back to 0.
    jsonOf(await post(env, 'sized:size', {}));
    await post(env, 'sized:remove', { limit: -1 });
    const empty = jsonOf<Record<string, number>>(await post(env, 'sized:size'));
    assert.equal(empty.memory, 0);
    assert.equal(empty['index.by-id'], 0);
    assert.equal((await post(env, 'sized:dropIndex', { name: 'bt' })).statusCode, 204);
  });

  it('404 for an unknown collection (not created)', async () => {
    errorOf(await post(env, 'no-size:size'), 404, 'not_found');
    errorOf(await get(env, 'no-size'), 404, 'not_found');
  });
});

describe('service endpoints (§12)', () => {
  it('/v1, /release and /doc need no credentials', async () => {
    const welcome = await env.service.app.inject({ method: 'GET', url: '/v1' });
    const body = jsonOf<{ service: string; version: string }>(welcome);
    assert.equal(body.service, 'docdb');
    assert.equal(typeof body.version, 'string');
    const release = await env.service.app.inject({ method: 'GET', url: '/release' });
    assert.equal(jsonOf(release), body.version);
    const doc = await env.service.app.inject({ method: 'GET', url: '/doc' });
    assert.equal(doc.statusCode, 200);
    assert.match(String(doc.headers['content-type']), /^text\/plain/);
    assert.match(doc.body, /collections/);
  });

  it('/openapi.json: OpenAPI 3.1.0 with each colon action as its own POST path', async () => {
    const response = await env.service.app.inject({ method: 'GET', url: '/openapi.json' });
    const document = jsonOf<{ openapi: string; paths: Record<string, Record<string, unknown>> }>(response);
    assert.equal(document.openapi, '3.1.0');
    const base = '/v1/databases/{databaseId}/collections/{collection}';
    for (const action of [
      'dropCollection',
      'setDefaults',
      'size',
      'insert',
      'insertStream',
      'insertFullduplex',
      'find',
      'patch',
      'remove',
      'listIndexes',
      'createIndex',
      'getIndex',
      'dropIndex',
    ]) {
      assert.ok(document.paths[`${base}:${action}`]?.post, action);
    }
    assert.ok(document.paths[base]?.get);
    assert.equal(document.paths[base]?.post, undefined);
    assert.ok(document.paths[`${base}/documents/{documentId}`]?.get);
  });

  it('/v1/debug/dbs: the caller’s databases with collection names and counts; identity required', async () => {
    const list = jsonOf<{ id: string; collections: { name: string; total: number; indexes: number }[] }[]>(
      await get(env, '/v1/debug/dbs'),
    );
    const mine = list.find((database) => database.id === env.databaseId);
    assert.ok(mine);
    assert.deepEqual(
      mine.collections.find((c) => c.name === 'counted'),
      { name: 'counted', total: 3, indexes: 1 },
    );
    errorOf(await env.service.app.inject({ method: 'GET', url: '/v1/debug/dbs' }), 401, 'unauthorized');
  });

  it('POST $C over 10 MiB → 413', async () => {
    errorOf(
      await post(env, '', JSON.stringify({ name: 'huge', defaults: { x: 'y'.repeat(10 * 1024 * 1024) } })),
      413,
      'payload_too_large',
    );
    errorOf(await get(env, 'huge'), 404, 'not_found');
  });
});
