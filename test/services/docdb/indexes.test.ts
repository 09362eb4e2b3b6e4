// Index endpoints (docdb.md §7) and index behaviour (§9.4–§9.7), on SQLite or PostgreSQL.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import type { ServiceApp } from '../../../src/core/app.ts';
import { VERSION } from '../../../src/core/version.ts';
import { docdbService } from '../../../src/services/docdb/index.ts';
import { openStore, type Store } from '../../../src/store/index.ts';
import { testDialect } from '../../helpers/database.ts';
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
  post,
  seed,
  useEnv,
} from './fixtures.ts';

const env = useEnv();

const indexIds = (collection: string, body: object) => find(env, collection, { limit: -1, ...body }).then(ids);

describe(':createIndex, :listIndexes, :getIndex, :dropIndex', () => {
  it('creates map and btree indexes (201) with their records; lists them in creation order', async () => {
    await seed(env, 'ix', []);
    const map = await post(env, 'ix:createIndex', { name: 'by-email', type: 'map', field: 'email' });
    assert.equal(map.statusCode, 201);
    assert.equal(map.body, '{"field":"email","name":"by-email","sparse":false,"type":"map","unique":true}\n');
    const btree = await post(env, 'ix:createIndex', { name: 'bt', type: 'btree', fields: ['category', '-product'] });
    assert.equal(
      btree.body,
      '{"fields":["category","-product"],"name":"bt","sparse":false,"type":"btree","unique":false}\n',
    );
    assert.deepEqual(
      await createIndex(env, 'ix', { name: 'one', type: 'btree', field: 'n', unique: true, sparse: true, ignored: 1 }),
      { fields: ['n'], name: 'one', sparse: true, type: 'btree', unique: true },
    );
    assert.deepEqual(
      await createIndex(env, 'ix', { name: 'multi', type: 'map', field: 'tags', unique: false, sparse: true }),
      { field: 'tags', name: 'multi', sparse: true, type: 'map', unique: false },
    );
    // `fields` wins over `field` on a btree.
    assert.deepEqual(
      (await createIndex(env, 'ix', { name: 'both', type: 'btree', field: 'x', fields: ['y'] })).fields,
      ['y'],
    );
    const list = jsonOf<{ name: string }[]>(await post(env, 'ix:listIndexes'));
    assert.deepEqual(
      list.map((index) => index.name),
      ['by-email', 'bt', 'one', 'multi', 'both'],
    );
    assert.deepEqual(list[0], JSON.parse(map.body));
    assert.equal(jsonOf<{ indexes: number }>(await get(env, 'ix')).indexes, 5);
    assert.deepEqual(jsonOf(await post(env, 'ix:getIndex', { name: 'bt' })), JSON.parse(btree.body));
    assert.equal(
      errorOf(await post(env, 'ix:getIndex', { name: 'nope' }), 404, 'not_found'),
      "index 'nope' not found in collection 'ix'",
    );
  });

  it('409 when the name is taken', async () => {
    await seed(env, 'ix-taken', []);
    await createIndex(env, 'ix-taken', { name: 'i', type: 'map', field: 'a' });
    assert.equal(
      errorOf(await post(env, 'ix-taken:createIndex', { name: 'i', type: 'btree', fields: ['b'] }), 409, 'conflict'),
      "index 'i' already exists",
    );
    assert.equal(jsonOf<unknown[]>(await post(env, 'ix-taken:listIndexes')).length, 1);
  });

  it('validates the definition (400) before anything else; a valid one creates a missing collection', async () => {
    const bad: [unknown, string | null][] = [
      [{ name: 'x', type: 'hash', field: 'a' }, "unexpected type 'hash' instead of [map|btree]"],
      [{ name: 'x', field: 'a' }, null],
      [{ name: 'x', type: 7, field: 'a' }, null],
      [{ name: 'x', type: 'MAP', field: 'a' }, null],
      [{ type: 'map', field: 'a' }, null],
      [{ name: '', type: 'map', field: 'a' }, null],
      [{ name: 3, type: 'map', field: 'a' }, null],
      [{ name: 'x', type: 'map' }, null],
      [{ name: 'x', type: 'map', field: '' }, null],
      [{ name: 'x', type: 'map', field: 5 }, null],
      [{ name: 'x', type: 'map', fields: ['a'] }, null],
      [{ name: 'x', type: 'btree' }, null],
      [{ name: 'x', type: 'btree', fields: [] }, null],
      [{ name: 'x', type: 'btree', fields: 'a' }, null],
      [{ name: 'x', type: 'btree', fields: ['a', 1] }, null],
      [{ name: 'x', type: 'btree', fields: ['a', ''] }, null],
      [{ name: 'x', type: 'btree', fields: ['-'] }, null],
      [{ name: 'x', type: 'map', field: 'a', sparse: 'yes' }, null],
      [{ name: 'x', type: 'map', field: 'a', unique: 1 }, null],
      [[], null],
      ['"x"', null],
      ['null', null],
    ];
    for (const [body, message] of bad) {
      const got = errorOf(await post(env, 'ix-made:createIndex', body as object), 400, 'validation_error');
      if (message) assert.equal(got, message);
    }
    errorOf(await post(env, 'ix-made:createIndex', ''), 400, 'invalid_json');
    errorOf(await post(env, 'ix-made:createIndex', '{"name":'), 400, 'invalid_json');
    errorOf(await get(env, 'ix-made'), 404, 'not_found');
    await createIndex(env, 'ix-made', { name: 'i', type: 'map', field: 'a' });
    assert.deepEqual(jsonOf(await get(env, 'ix-made')), {
      name: 'ix-made',
      total: 0,
      indexes: 1,
      defaults: { id: 'uuid()' },
    });
  });

  it('listIndexes: [] when none; 404 for an unknown collection', async () => {
    await seed(env, 'ix-none', []);
    const none = await post(env, 'ix-none:listIndexes');
    assert.equal(none.body, '[]\n');
    errorOf(await post(env, 'ix-unknown:listIndexes'), 404, 'not_found');
    errorOf(await post(env, 'ix-unknown:getIndex', { name: 'a' }), 404, 'not_found');
    errorOf(await post(env, 'ix-none:getIndex', {}), 400, 'validation_error');
    errorOf(await post(env, 'ix-none:getIndex', ''), 400, 'invalid_json');
  });

  it('dropIndex: 204 with an empty body; 404 for an unknown index or collection (not created)', async () => {
    await seed(env, 'ix-drop', [{ id: 'a', k: 'x' }]);
    await createIndex(env, 'ix-drop', { name: 'by-k', type: 'map', field: 'k' });
    await createIndex(env, 'ix-drop', { name: 'keep', type: 'btree', fields: ['id'] });
    const dropped = await post(env, 'ix-drop:dropIndex', { name: 'by-k' });
    assert.equal(dropped.statusCode, 204);
    assert.equal(dropped.body, '');
    assert.deepEqual(
      jsonOf<{ name: string }[]>(await post(env, 'ix-drop:listIndexes')).map((i) => i.name),
      ['keep'],
    );
    assert.equal(
      errorOf(await post(env, 'ix-drop:dropIndex', { name: 'by-k' }), 404, 'not_found'),
      "index 'by-k' not found in collection 'ix-drop'",
    );
    errorOf(await post(env, 'ix-drop:find', { index: 'by-k', value: 'x' }), 404, 'not_found');
    // With the unique index gone, duplicates are allowed; the name can be used again.
    await insert(env, 'ix-drop', [{ id: 'b', k: 'x' }]);
    errorOf(await post(env, 'ix-drop:createIndex', { name: 'by-k', type: 'map', field: 'k' }), 409, 'conflict');
    await createIndex(env, 'ix-drop', { name: 'by-k', type: 'map', field: 'k', unique: false });
    assert.deepEqual(await indexIds('ix-drop', { index: 'by-k', value: 'x' }), ['a', 'b']);
    errorOf(await post(env, 'ix-drop-missing:dropIndex', { name: 'a' }), 404, 'not_found');
    errorOf(await get(env, 'ix-drop-missing'), 404, 'not_found');
    errorOf(await post(env, 'ix-drop:dropIndex', {}), 400, 'validation_error');
    errorOf(await post(env, 'ix-drop:dropIndex', { name: 1 }), 400, 'validation_error');
  });

  it('a field name with a dot is a literal top-level key', async () => {
    await seed(env, 'ix-dot', [
      { id: 'lit', 'a.b': 'x' },
      { id: 'nested', a: { b: 'x' }, 'a.b': 'y' },
    ]);
    await createIndex(env, 'ix-dot', { name: 'dot', type: 'map', field: 'a.b' });
    assert.deepEqual(await indexIds('ix-dot', { index: 'dot', value: 'x' }), ['lit']);
    await createIndex(env, 'ix-dot', { name: 'bt', type: 'btree', fields: ['-a.b'] });
    assert.deepEqual(await indexIds('ix-dot', { index: 'bt' }), ['nested', 'lit']);
  });
});

describe('map indexes (§9.5)', () => {
  it('unique by default: a second document with the key → 409', async () => {
    await seed(env, 'map-unique', [{ id: 'a', email: 'a@x' }]);
    await createIndex(env, 'map-unique', { name: 'by-email', type: 'map', field: 'email' });
    assert.equal(
      errorOf(await post(env, 'map-unique:insert', '{"id":"b","email":"a@x"}'), 409, 'conflict'),
      "index add 'by-email': index conflict: field 'email' with value 'a@x'",
    );
    await insert(env, 'map-unique', [{ id: 'b', email: 'b@x' }]);
    assert.deepEqual(await indexIds('map-unique', { index: 'by-email', value: 'a@x' }), ['a']);
    assert.deepEqual(await indexIds('map-unique', { index: 'by-email', value: 'nobody' }), []);
    // Case-sensitive, exact.
    assert.deepEqual(await indexIds('map-unique', { index: 'by-email', value: 'A@X' }), []);
  });

  it('unique: false lets documents share keys, found in insertion order', async () => {
    await seed(env, 'map-multi', [
      { id: '1', g: 'x' },
      { id: '2', g: 'y' },
      { id: '3', g: 'x' },
    ]);
    await createIndex(env, 'map-multi', { name: 'by-g', type: 'map', field: 'g', unique: false });
    await insert(env, 'map-multi', [{ id: '4', g: 'x' }]);
    assert.deepEqual(await indexIds('map-multi', { index: 'by-g', value: 'x' }), ['1', '3', '4']);
    assert.deepEqual(ids(await find(env, 'map-multi', { index: 'by-g', value: 'x' })), ['1'], 'limit 1 by default');
    assert.deepEqual(await indexIds('map-multi', { index: 'by-g', value: 'x', skip: 1, limit: 1 }), ['3']);
    assert.deepEqual(await indexIds('map-multi', { index: 'by-g', value: 'x', filter: { id: { $ne: '1' } } }), [
      '3',
      '4',
    ]);
    // reverse/from/to are ignored on a map index.
    assert.deepEqual(
      await indexIds('map-multi', { index: 'by-g', value: 'x', reverse: true, from: { g: 'z' }, to: { g: 'a' } }),
      ['1', '3', '4'],
    );
  });

  it('an array of strings gives one key per distinct element; [] gives none', async () => {
    await seed(env, 'map-array', []);
    await createIndex(env, 'map-array', { name: 'by-tag', type: 'map', field: 'tags' });
    await insert(env, 'map-array', [
      { id: 'a', tags: ['red', 'blue', 'red'] },
      { id: 'b', tags: [] },
      { id: 'c', tags: 'green' },
    ]);
    assert.deepEqual(await indexIds('map-array', { index: 'by-tag', value: 'red' }), ['a']);
    assert.deepEqual(await indexIds('map-array', { index: 'by-tag', value: 'blue' }), ['a']);
    assert.deepEqual(await indexIds('map-array', { index: 'by-tag', value: 'green' }), ['c']);
    // A conflict on any element rejects the whole document and names the conflicting element.
    const message = errorOf(await post(env, 'map-array:insert', '{"id":"d","tags":["new","blue"]}'), 409, 'conflict');
    assert.equal(message, "index add 'by-tag': index conflict: field 'tags' with value 'blue'");
    assert.deepEqual(
      await indexIds('map-array', { index: 'by-tag', value: 'new' }),
      [],
      'no key of a rejected document is stored',
    );
    assert.equal(
      errorOf(await post(env, 'map-array:insert', '{"id":"e","tags":["x","green"]}'), 409, 'conflict'),
      "index add 'by-tag': index conflict: field 'tags' with value 'green'",
    );
    await insert(env, 'map-array', [{ id: 'f', tags: ['new'] }]);
    // [] and an array of only-duplicates are fine; an empty string is a key like any other.
    await insert(env, 'map-array', [
      { id: 'g', tags: [] },
      { id: 'h', tags: ['', ''] },
    ]);
    assert.deepEqual(await indexIds('map-array', { index: 'by-tag' }), ['h'], 'value defaults to ""');
    assert.deepEqual(await indexIds('map-array', { index: 'by-tag', value: '' }), ['h']);
  });

  it('rejects every other value: 409 type not supported, and no value crashes the index', async () => {
    await seed(env, 'map-types', []);
    await createIndex(env, 'map-types', { name: 'm', type: 'map', field: 'v', sparse: true });
    for (const value of [
      '1',
      '0',
      '-1.5',
      'true',
      'false',
      'null',
      '{}',
      '{"a":"b"}',
      '[1]',
      '["a",2]',
      '["a",null]',
      '[["a"]]',
      '[{}]',
      '12345678901234567890',
    ]) {
      const body = `{"id":"x","v":${value}}`;
      const response = await post(env, 'map-types:insert', body);
      if (value === 'null') {
        // Sparse: a present null counts as missing.
        assert.equal(response.statusCode, 201, response.body);
        continue;
      }
      assert.equal(errorOf(response, 409, 'conflict'), "index add 'm': type not supported", body);
    }
    assert.equal(jsonOf<{ total: number }>(await get(env, 'map-types')).total, 1);
    await seed(env, 'map-strict', []);
    await createIndex(env, 'map-strict', { name: 'strict', type: 'map', field: 'w', unique: false });
    assert.equal(
      errorOf(await post(env, 'map-strict:insert', '{"w":null}'), 409, 'conflict'),
      "index add 'strict': type not supported",
      'not sparse: null is an unsupported value',
    );
    assert.equal(
      errorOf(await post(env, 'map-strict:insert', '{"other":1}'), 409, 'conflict'),
      "index add 'strict': field `w` is indexed and mandatory",
    );
    await insert(env, 'map-strict', [{ w: 'ok' }, { w: 'ok' }]);
    assert.equal(jsonOf<{ total: number }>(await get(env, 'map-strict')).total, 2);
    // Non-string lookups are 400.
    errorOf(await post(env, 'map-types:find', { index: 'm', value: 1 }), 400, 'validation_error');
    errorOf(await post(env, 'map-types:find', { index: 'm', value: ['a'] }), 400, 'validation_error');
  });

  it('sparse: documents without the field are left out', async () => {
    await seed(env, 'map-sparse', []);
    await createIndex(env, 'map-sparse', { name: 's', type: 'map', field: 'k', sparse: true });
    await insert(env, 'map-sparse', [{ id: '1' }, { id: '2', k: 'a' }, { id: '3', k: null }, { id: '4' }]);
    assert.deepEqual(await indexIds('map-sparse', { index: 's', value: 'a' }), ['2']);
    assert.deepEqual(await indexIds('map-sparse', { index: 's' }), []);
    const size = jsonOf<Record<string, number>>(await post(env, 'map-sparse:size'));
    assert.ok(size['index.s']! > 0);
  });

  it('building over existing data: the error names the cause and the document; nothing is created', async () => {
    await seed(env, 'map-build', [
      { id: '1' },
      { id: '2', email: 'a' },
      { id: '3', email: 'a' },
      { id: '4', email: 4 },
    ]);
    const missing = errorOf(
      await post(env, 'map-build:createIndex', { name: 'e', type: 'map', field: 'email' }),
      409,
      'conflict',
    );
    assert.equal(missing, 'index row: field `email` is indexed and mandatory, data: {"id":"1"}');
    const duplicate = errorOf(
      await post(env, 'map-build:createIndex', { name: 'e', type: 'map', field: 'email', sparse: true }),
      409,
      'conflict',
    );
    assert.equal(
      duplicate,
      'index row: index conflict: field \'email\' with value \'a\', data: {"id":"3","email":"a"}',
    );
    const unsupported = errorOf(
      await post(env, 'map-build:createIndex', { name: 'e', type: 'map', field: 'email', sparse: true, unique: false }),
      409,
      'conflict',
    );
    assert.equal(unsupported, 'index row: type not supported, data: {"id":"4","email":4}');
    assert.equal(await post(env, 'map-build:listIndexes').then((r) => r.body), '[]\n');
    linesOf(await post(env, 'map-build:remove', { filter: { id: '4' } }));
    await createIndex(env, 'map-build', { name: 'e', type: 'map', field: 'email', sparse: true, unique: false });
    assert.deepEqual(await indexIds('map-build', { index: 'e', value: 'a' }), ['2', '3']);
  });
});

describe('btree indexes (§9.6, §9.7)', () => {
  const worked = [
    { id: '1', category: 'fruit', product: 'orange' },
    { id: '2', category: 'drink', product: 'water' },
    { id: '3', category: 'drink', product: 'milk' },
    { id: '4', category: 'fruit', product: 'apple' },
  ];
  const from = { category: 'drink', product: 'water' };

  it('the §9.7 worked example, every row', async () => {
    await seed(env, 'bt-worked', worked);
    await createIndex(env, 'bt-worked', { name: 'bt', type: 'btree', fields: ['category', 'product'] });
    await createIndex(env, 'bt-worked', { name: 'bt-desc', type: 'btree', fields: ['category', '-product'] });
    const rows: [object, string[]][] = [
      [{ index: 'bt' }, ['3', '2', '4', '1']],
      [{ index: 'bt', reverse: true }, ['1', '4', '2', '3']],
      [{ index: 'bt-desc' }, ['2', '3', '1', '4']],
      [{ index: 'bt', filter: { category: 'fruit' } }, ['4', '1']],
      [{ index: 'bt', from }, ['2', '4', '1']],
      [{ index: 'bt', from, reverse: true }, ['1', '4']],
      [{ index: 'bt', to: { category: 'fruit', product: 'apple' } }, ['3', '2']],
      [{ index: 'bt', to: { category: 'fruit', product: 'apple' }, reverse: true }, ['4', '2', '3']],
      [{ index: 'bt', from, to: { category: 'fruit', product: 'orange' } }, ['2', '4']],
      [{ index: 'bt', from, to: { category: 'fruit', product: 'orange' }, reverse: true }, ['1', '4']],
    ];
    for (const [query, expected] of rows) {
      assert.deepEqual(ids(await find(env, 'bt-worked', { limit: 10, ...query })), expected, JSON.stringify(query));
    }
    // A missing pivot member counts as null: from {category:fruit} starts at the first fruit.
    assert.deepEqual(await indexIds('bt-worked', { index: 'bt', from: { category: 'fruit' } }), ['4', '1']);
    assert.deepEqual(await indexIds('bt-worked', { index: 'bt', to: { category: 'fruit' } }), ['3', '2']);
    assert.deepEqual(
      await indexIds('bt-worked', {
        index: 'bt',
        from: { category: 'fruit', extra: 1 },
        to: { category: 'zzz' },
        reverse: true,
      }),
      ['1', '4'],
    );
    // Descending component pivots: a "greater" pivot is a smaller value.
    assert.deepEqual(await indexIds('bt-worked', { index: 'bt-desc', from: { category: 'drink', product: 'milk' } }), [
      '3',
      '1',
      '4',
    ]);
    // null sorts last in a descending component: (fruit, null) is after every fruit there.
    assert.deepEqual(await indexIds('bt-worked', { index: 'bt-desc', from: { category: 'fruit' } }), []);
    assert.deepEqual(await indexIds('bt-worked', { index: 'bt-desc', to: { category: 'fruit' } }), [
      '2',
      '3',
      '1',
      '4',
    ]);
    assert.deepEqual(await indexIds('bt-worked', { index: 'bt-desc', from: { category: 'drink' } }), ['1', '4']);
    assert.deepEqual(
      await indexIds('bt-worked', { index: 'bt-desc', to: { category: 'fruit', product: 'apple' }, reverse: true }),
      ['4', '1', '3', '2'],
    );
    // Empty ranges.
    assert.deepEqual(
      await indexIds('bt-worked', { index: 'bt', from: { category: 'fruit' }, to: { category: 'drink' } }),
      [],
    );
    assert.deepEqual(
      await indexIds('bt-worked', {
        index: 'bt',
        from: { category: 'fruit' },
        to: { category: 'drink' },
        reverse: true,
      }),
      [],
    );
    assert.deepEqual(await indexIds('bt-worked', { index: 'bt', from, to: from }), []);
    // value is ignored on a btree; skip and limit apply after the range.
    assert.deepEqual(await indexIds('bt-worked', { index: 'bt', value: 'zzz', skip: 1, limit: 2 }), ['2', '4']);
  });

  it('non-unique allows duplicates in insertion order (3, 2, 4, 5, 1); unique → 409', async () => {
    await seed(env, 'bt-dup', worked);
    await createIndex(env, 'bt-dup', { name: 'bt', type: 'btree', fields: ['category', 'product'] });
    await insert(env, 'bt-dup', [{ id: '5', category: 'fruit', product: 'apple' }]);
    assert.deepEqual(await indexIds('bt-dup', { index: 'bt' }), ['3', '2', '4', '5', '1']);
    assert.deepEqual(await indexIds('bt-dup', { index: 'bt', reverse: true }), ['1', '5', '4', '2', '3']);
    assert.deepEqual(
      await indexIds('bt-dup', {
        index: 'bt',
        from: { category: 'fruit', product: 'apple' },
        to: { category: 'fruit', product: 'orange' },
      }),
      ['4', '5'],
    );
    assert.deepEqual(
      await indexIds('bt-dup', {
        index: 'bt',
        from: { category: 'drink', product: 'water' },
        to: { category: 'fruit', product: 'apple' },
        reverse: true,
      }),
      ['5', '4'],
    );

    await seed(env, 'bt-unique', worked);
    await createIndex(env, 'bt-unique', { name: 'bt', type: 'btree', fields: ['category', '-product'], unique: true });
    const message = errorOf(
      await post(env, 'bt-unique:insert', '{"id":"5","category":"fruit","product":"apple"}'),
      409,
      'conflict',
    );
    assert.equal(message, "index add 'bt': key (category:fruit,-product:apple) already exists");
    assert.deepEqual(await indexIds('bt-unique', { index: 'bt' }), ['2', '3', '1', '4']);
    // Building a unique index over duplicates fails and names the document.
    const build = errorOf(
      await post(env, 'bt-dup:createIndex', {
        name: 'u',
        type: 'btree',
        fields: ['category', 'product'],
        unique: true,
      }),
      409,
      'conflict',
    );
    assert.equal(
      build,
      'index row: key (category:fruit,product:apple) already exists, data: {"id":"5","category":"fruit","product":"apple"}',
    );
  });

  it('missing fields: rejected unless sparse; a present null is a value', async () => {
    await seed(env, 'bt-missing', [{ id: 'a', x: 1 }]);
    const build = errorOf(
      await post(env, 'bt-missing:createIndex', { name: 'bt', type: 'btree', fields: ['x', '-y'] }),
      409,
      'conflict',
    );
    assert.equal(build, 'index row: field \'y\' not defined, data: {"id":"a","x":1}');
    await createIndex(env, 'bt-missing', { name: 'bt', type: 'btree', fields: ['x'] });
    assert.equal(
      errorOf(await post(env, 'bt-missing:insert', '{"id":"b"}'), 409, 'conflict'),
      "index add 'bt': field 'x' not defined",
    );
    await insert(env, 'bt-missing', [{ id: 'n', x: null }]);
    assert.deepEqual(await indexIds('bt-missing', { index: 'bt' }), ['n', 'a']);

    await seed(env, 'bt-sparse', [
      { id: '1', a: 2, b: 1 },
      { id: '2', a: 1 },
      { id: '3', b: 1 },
      { id: '4', a: null, b: null },
      { id: '5', a: 1, b: 0 },
    ]);
    await createIndex(env, 'bt-sparse', { name: 'sp', type: 'btree', fields: ['a', '-b'], sparse: true });
    assert.deepEqual(await indexIds('bt-sparse', { index: 'sp' }), ['4', '5', '1']);
    assert.deepEqual(await indexIds('bt-sparse', { index: 'sp', reverse: true }), ['1', '5', '4']);
    await insert(env, 'bt-sparse', [{ id: '6' }, { id: '7', a: 1, b: 5 }]);
    assert.deepEqual(await indexIds('bt-sparse', { index: 'sp' }), ['4', '7', '5', '1']);
    // Patching a field away takes the document out; patching it back puts it in.
    linesOf(await post(env, 'bt-sparse:patch', { filter: { id: '7' }, patch: { b: null } }));
    assert.deepEqual(await indexIds('bt-sparse', { index: 'sp' }), ['4', '5', '1']);
    linesOf(await post(env, 'bt-sparse:patch', { filter: { id: '2' }, patch: { b: 9 } }));
    assert.deepEqual(await indexIds('bt-sparse', { index: 'sp' }), ['4', '2', '5', '1']);
    linesOf(await post(env, 'bt-sparse:remove', { index: 'sp', limit: 2 }));
    assert.deepEqual(await indexIds('bt-sparse', { index: 'sp' }), ['5', '1']);
    assert.deepEqual(await indexIds('bt-sparse', {}), ['1', '3', '5', '6', '7']);
  });

  it('orders every JSON type: null < false < true < numbers < strings < arrays < objects', async () => {
    const values = [
      'b',
      2,
      null,
      { k: 1 },
      true,
      -1,
      'a',
      [1],
      false,
      1.5,
      '',
      [],
      {},
      -0.5,
      'B',
      [0, 1],
      { a: 2 },
      1e300,
      -1e300,
      'é',
      'z',
    ];
    await seed(
      env,
      'bt-types',
      values.map((v, i) => ({ id: String(i), v })),
    );
    await createIndex(env, 'bt-types', { name: 'asc', type: 'btree', fields: ['v'] });
    await createIndex(env, 'bt-types', { name: 'desc', type: 'btree', fields: ['-v'] });
    const expected = [
      null,
      false,
      true,
      -1e300,
      -1,
      -0.5,
      1.5,
      2,
      1e300,
      '',
      'B',
      'a',
      'b',
      'z',
      'é',
      [],
      [0, 1],
      [1],
      {},
      { a: 2 },
      { k: 1 },
    ];
    const asc = (await find(env, 'bt-types', { index: 'asc', limit: -1 })).map((d) => d.v);
    assert.deepEqual(asc, expected);
    const desc = (await find(env, 'bt-types', { index: 'desc', limit: -1 })).map((d) => d.v);
    assert.deepEqual(desc, [...expected].reverse());
    assert.deepEqual(
      (await find(env, 'bt-types', { index: 'asc', reverse: true, limit: -1 })).map((d) => d.v),
      [...expected].reverse(),
    );
    // Pivots of any type.
    assert.deepEqual(
      (await find(env, 'bt-types', { index: 'asc', from: { v: true }, to: { v: '' }, limit: -1 })).map((d) => d.v),
      [true, -1e300, -1, -0.5, 1.5, 2, 1e300],
    );
    assert.deepEqual(
      (await find(env, 'bt-types', { index: 'asc', from: { v: [] }, limit: -1 })).map((d) => d.v),
      [[], [0, 1], [1], {}, { a: 2 }, { k: 1 }],
    );
    assert.deepEqual(
      (await find(env, 'bt-types', { index: 'desc', from: { v: 0 }, to: { v: null }, limit: -1 })).map((d) => d.v),
      [-0.5, -1, -1e300, true, false],
    );
  });

  it('uniqueness uses the total order: 1 = 1.0, -0 = 0, but "1" ≠ 1', async () => {
    await seed(env, 'bt-eq', [{ v: 1 }, { v: 0 }]);
    await createIndex(env, 'bt-eq', { name: 'u', type: 'btree', fields: ['v'], unique: true });
    errorOf(await post(env, 'bt-eq:insert', '{"v":1.0}'), 409, 'conflict');
    errorOf(await post(env, 'bt-eq:insert', '{"v":-0}'), 409, 'conflict');
    errorOf(await post(env, 'bt-eq:insert', '{"v":1e0}'), 409, 'conflict');
    await insert(env, 'bt-eq', [{ v: '1' }, { v: true }, { v: [1] }, { v: { v: 1 } }, { v: null }]);
    errorOf(await post(env, 'bt-eq:insert', '{"v":{"v":1.0}}'), 409, 'conflict');
    errorOf(await post(env, 'bt-eq:insert', '{"v":null}'), 409, 'conflict');
  });

  it('pivots must be objects', async () => {
    await seed(env, 'bt-pivot', [{ id: '1', n: 1 }]);
    await createIndex(env, 'bt-pivot', { name: 'bt', type: 'btree', fields: ['n'] });
    for (const bad of [{ from: 1 }, { to: 'x' }, { from: [1] }, { to: null }, { reverse: 'yes' }]) {
      errorOf(await post(env, 'bt-pivot:find', { index: 'bt', ...bad }), 400, 'validation_error');
    }
    // from/to are ignored (not validated) on a full scan.
    assert.deepEqual(ids(await find(env, 'bt-pivot', { from: 1 })), ['1']);
  });

  it('stays correct across patch and remove, with ties and descending components', async () => {
    const documents = Array.from({ length: 40 }, (_, i) => ({ id: `d${i}`, g: i % 3, n: i % 5 }));
    await seed(env, 'bt-live', documents);
    await createIndex(env, 'bt-live', { name: 'bt', type: 'btree', fields: ['g', '-n'] });
    const model = new Map(documents.map((d) => [d.id, { ...d }]));
    const order = () =>
      [...model.values()]
        .map((d, i) => ({ d, i }))
        .sort(
          (x, y) => x.d.g - y.d.g || y.d.n - x.d.n || Number(x.d.id.slice(1)) - Number(y.d.id.slice(1)) || x.i - y.i,
        )
        .map((x) => x.d.id);
    assert.deepEqual(await indexIds('bt-live', { index: 'bt' }), order());
    linesOf(await post(env, 'bt-live:patch', { filter: { n: 4 }, limit: -1, patch: { g: 1, n: 0 } }));
    for (const d of model.values()) if (d.n === 4) Object.assign(d, { g: 1, n: 0 });
    linesOf(await post(env, 'bt-live:remove', { filter: { g: 0 }, limit: 5 }));
    for (const id of [...model.values()]
      .filter((d) => d.g === 0)
      .slice(0, 5)
      .map((d) => d.id))
      model.delete(id);
    assert.deepEqual(await indexIds('bt-live', { index: 'bt' }), order());
    assert.deepEqual(await indexIds('bt-live', { index: 'bt', reverse: true }), order().reverse());
    assert.deepEqual(await indexIds('bt-live', {}), [...model.keys()]);
  });

  it('large traversals page through ties in both directions', async () => {
    const count = 2600;
    const documents = Array.from({ length: count }, (_, i) => ({ id: i, k: i % 3 === 0 ? 'same' : `k${i % 7}` }));
    await seed(env, 'bt-large', documents);
    await createIndex(env, 'bt-large', { name: 'bt', type: 'btree', fields: ['k'] });
    const expected = [...documents].sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : a.id - b.id)).map((d) => d.id);
    assert.deepEqual(await indexIds('bt-large', { index: 'bt' }), expected);
    assert.deepEqual(await indexIds('bt-large', { index: 'bt', reverse: true }), [...expected].reverse());
    const same = documents.filter((d) => d.k === 'same').map((d) => d.id);
    assert.deepEqual(await indexIds('bt-large', { index: 'bt', from: { k: 'same' } }), same);
    assert.deepEqual(
      await indexIds('bt-large', { index: 'bt', from: { k: 'k6' }, reverse: true }),
      [...same].reverse(),
    );
    assert.deepEqual(await indexIds('bt-large', { index: 'bt', skip: count - 2 }), expected.slice(-2));
    // Map index pages too.
    await createIndex(env, 'bt-large', { name: 'm', type: 'map', field: 'k', unique: false });
    assert.deepEqual(await indexIds('bt-large', { index: 'm', value: 'same' }), same);
  });
});

describe('long keys', () => {
  // Random text does not compress: PostgreSQL refuses index entries over ~2.7 KB of it.
  const random = (length: number, seed: string) => (seed + randomBytes(length).toString('base64')).slice(0, length);

  it('map indexes take values of any length, distinct, unique and found by lookup', async () => {
    await seed(env, 'long-map', []);
    await createIndex(env, 'long-map', { name: 'u', type: 'map', field: 'k' });
    await createIndex(env, 'long-map', { name: 'm', type: 'map', field: 'tags', unique: false, sparse: true });
    const a = random(5000, 'a');
    const b = `${a.slice(0, 4000)}${random(1000, 'b')}`;
    const huge = random(200_000, 'h');
    await insert(env, 'long-map', [
      { id: 'a', k: a, tags: [a, 'short'] },
      { id: 'b', k: b, tags: [a] },
      { id: 'h', k: huge },
    ]);
    assert.deepEqual(await indexIds('long-map', { index: 'u', value: a }), ['a']);
    assert.deepEqual(await indexIds('long-map', { index: 'u', value: b }), ['b']);
    assert.deepEqual(await indexIds('long-map', { index: 'u', value: huge }), ['h']);
    assert.deepEqual(await indexIds('long-map', { index: 'u', value: a.slice(0, 4999) }), []);
    assert.deepEqual(await indexIds('long-map', { index: 'm', value: a }), ['a', 'b']);
    const message = errorOf(await post(env, 'long-map:insert', { id: 'c', k: a }), 409, 'conflict');
    assert.ok(message.startsWith("index add 'u': index conflict: field 'k' with value 'a"), message);
    // By id through a map index on `id`, however long.
    await createIndex(env, 'long-map', { name: 'ids', type: 'map', field: 'id' });
    const longId = random(3000, 'i');
    await insert(env, 'long-map', [{ id: longId, k: 'x' }]);
    assert.deepEqual(
      jsonOf<{ source: unknown }>(await get(env, `long-map/documents/${encodeURIComponent(longId)}`)).source,
      { type: 'index', name: 'ids' },
    );
    // Patch and remove keep the entries right.
    linesOf(await post(env, 'long-map:patch', { index: 'u', value: b, patch: { k: huge.slice(1) } }));
    assert.deepEqual(await indexIds('long-map', { index: 'u', value: b }), []);
    assert.deepEqual(await indexIds('long-map', { index: 'u', value: huge.slice(1) }), ['b']);
    linesOf(await post(env, 'long-map:remove', { index: 'u', value: huge }));
    await insert(env, 'long-map', [{ id: 'h2', k: huge }]);
  });

  it('btree keys over 2048 bytes are refused with a 409, never a 500', async () => {
    await seed(env, 'long-bt', []);
    await createIndex(env, 'long-bt', { name: 'bt', type: 'btree', fields: ['k'] });
    const ok = [random(1500, 'c'), random(1500, 'a'), random(1500, 'b')];
    await insert(
      env,
      'long-bt',
      ok.map((k) => ({ k })),
    );
    assert.deepEqual(
      (await find(env, 'long-bt', { index: 'bt', limit: -1 })).map((d) => d.k),
      [...ok].sort(),
    );
    assert.equal(
      errorOf(await post(env, 'long-bt:insert', { k: random(3000, 'x') }), 409, 'conflict'),
      "index add 'bt': key too long (more than 2048 bytes)",
    );
    errorOf(await post(env, 'long-bt:insert', { k: [random(1500, 'x'), random(1500, 'y')] }), 409, 'conflict');
    errorOf(await post(env, 'long-bt:patch', { patch: { k: random(5000, 'z') } }), 409, 'conflict');
    // A long pivot is fine: it is only compared.
    assert.equal(
      (await find(env, 'long-bt', { index: 'bt', from: { k: `b${'~'.repeat(10_000)}` }, limit: -1 })).length,
      1,
    );
    await seed(env, 'long-bt-build', [{ id: 'long', k: random(3000, 'x') }]);
    const build = errorOf(
      await post(env, 'long-bt-build:createIndex', { name: 'bt', type: 'btree', fields: ['k'] }),
      409,
      'conflict',
    );
    assert.ok(build.startsWith('index row: key too long (more than 2048 bytes), data: {"id":"long"'), build);
    await createIndex(env, 'long-bt-build', { name: 'm', type: 'map', field: 'k' });
  });
});

describe('unique constraints under concurrency', () => {
  it('parallel inserts of one key: exactly one wins', async () => {
    await seed(env, 'race', []);
    await createIndex(env, 'race', { name: 'u', type: 'map', field: 'k' });
    await createIndex(env, 'race', { name: 'bt', type: 'btree', fields: ['k2'], unique: true, sparse: true });
    const responses = await Promise.all(
      Array.from({ length: 12 }, (_, i) => post(env, 'race:insert', { k: 'same', i })),
    );
    assert.equal(responses.filter((r) => r.statusCode === 201).length, 1);
    for (const r of responses.filter((r) => r.statusCode !== 201)) errorOf(r, 409, 'conflict');
    const patches = await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        await insert(env, 'race', [{ k: `p${i}` }]);
        return post(env, 'race:patch', { index: 'u', value: `p${i}`, patch: { k2: 'shared' } });
      }),
    );
    assert.equal(patches.filter((r) => r.statusCode === 200).length, 1);
    assert.equal((await find(env, 'race', { index: 'bt', limit: -1 })).length, 1);
    // A later conflict inside one stream reports an error line.
    const lines = linesOf(await post(env, 'race:insert', '{"k":"fresh"}\n{"k":"same"}'), 201);
    errorLine(lines[1], 409, 'conflict');
  });
});

describe('two instances on one store', () => {
  let storeB: Store;
  let appB: ServiceApp;

  before(async () => {
    // On PostgreSQL its own connections and LISTEN; embedded, the same store (one process) but
    // its own app, so its own cache of collection definitions.
    storeB = testDialect === 'postgres' ? await openStore(env.service.settings) : env.service.store;
    appB = await docdbService.build({
      settings: env.service.settings,
      store: storeB,
      logger: pino({ level: 'silent' }),
      version: VERSION,
    });
    await appB.ready();
  });
  after(async () => {
    await appB.close();
    if (storeB !== env.service.store) await storeB.close();
  });

  const onB = (action: string, body: string | object) =>
    appB.inject({
      method: 'POST',
      url: `${env.C}/${action}`,
      headers: { ...env.headers, 'content-type': 'application/json' },
      payload: typeof body === 'string' ? body : JSON.stringify(body),
    });

  /** Retries `check` until it passes (definition changes reach the other instance through the notifier). */
  async function eventually(check: () => Promise<void>): Promise<void> {
    const deadline = Date.now() + 3000;
    for (;;) {
      try {
        return await check();
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
  }

  it('index and collection changes made on one instance are seen by the other', async () => {
    await seed(env, 'two', [{ id: 'a', k: 'x' }]);
    // B reads (and caches) the collection.
    assert.equal((await onB('two:find', {})).statusCode, 200);
    await createIndex(env, 'two', { name: 'by-k', type: 'map', field: 'k' });
    await eventually(async () => {
      const found = await onB('two:find', { index: 'by-k', value: 'x' });
      assert.equal(found.statusCode, 200, found.body);
      assert.equal(found.body, '{"id":"a","k":"x"}\n');
    });
    // B writes through the index A created: the unique index holds.
    errorOf(await onB('two:insert', '{"id":"b","k":"x"}'), 409, 'conflict');
    // A drops the collection; B recreates it by inserting, with the default defaults.
    assert.equal((await post(env, 'two:dropCollection')).statusCode, 204);
    await eventually(async () => {
      const inserted = await onB('two:insert', '{"k":"x"}');
      assert.equal(inserted.statusCode, 201, inserted.body);
    });
    assert.equal(jsonOf<{ total: number; indexes: number }>(await get(env, 'two')).indexes, 0);
    assert.equal(jsonOf<{ total: number }>(await get(env, 'two')).total, 1);
    // Defaults set on B apply to A's next insert.
    assert.equal((await onB('two:setDefaults', { n: 'auto()' })).statusCode, 200);
    await eventually(async () => {
      const [line] = linesOf(await post(env, 'two:insertFullduplex', '{"probe":true}'));
      assert.equal(typeof line!.n, 'number');
    });
  });

  it('an answer B keeps never outlives a write acknowledged by A (find answer cache)', async () => {
    await seed(env, 'two-answers', [{ id: 'a', k: 'x', n: 1 }]);
    await createIndex(env, 'two-answers', { name: 'by-k', type: 'map', field: 'k', unique: false });
    const lookup = { index: 'by-k', value: 'x', limit: -1 };
    const onBody = async () => (await onB('two-answers:find', lookup)).body;
    await eventually(async () => assert.equal(await onBody(), '{"id":"a","k":"x","n":1}\n'));
    // Asked again, B answers from what it kept; every write through A shows at once all the same.
    assert.equal(await onBody(), '{"id":"a","k":"x","n":1}\n');
    await insert(env, 'two-answers', [{ id: 'b', k: 'x', n: 2 }]);
    assert.equal(await onBody(), '{"id":"a","k":"x","n":1}\n{"id":"b","k":"x","n":2}\n');
    linesOf(await post(env, 'two-answers:patch', { ...lookup, filter: { id: 'a' }, patch: { n: 3 } }));
    assert.equal(await onBody(), '{"id":"a","k":"x","n":3}\n{"id":"b","k":"x","n":2}\n');
    linesOf(await post(env, 'two-answers:remove', { ...lookup, filter: { id: 'b' } }));
    assert.equal(await onBody(), '{"id":"a","k":"x","n":3}\n');
    // And B's own writes show in A's answers.
    assert.equal((await post(env, 'two-answers:find', lookup)).body, '{"id":"a","k":"x","n":3}\n');
    assert.equal((await onB('two-answers:insert', '{"id":"c","k":"x","n":4}')).statusCode, 201);
    assert.equal(
      (await post(env, 'two-answers:find', lookup)).body,
      '{"id":"a","k":"x","n":3}\n{"id":"c","k":"x","n":4}\n',
    );
    // A dropped collection answers 404 on B, not its last answer.
    assert.equal((await post(env, 'two-answers:dropCollection')).statusCode, 204);
    errorOf(await onB('two-answers:find', lookup), 404, 'not_found');
  });

  it('unique keys hold across instances under concurrency', async () => {
    await seed(env, 'two-race', []);
    await createIndex(env, 'two-race', { name: 'u', type: 'btree', fields: ['k'], unique: true });
    await eventually(async () => assert.equal((await onB('two-race:find', { index: 'u' })).statusCode, 200));
    const attempts = Array.from({ length: 10 }, (_, i) =>
      i % 2 === 0 ? post(env, 'two-race:insert', { k: 1 }) : onB('two-race:insert', { k: 1 }),
    );
    const responses = await Promise.all(attempts);
    assert.equal(responses.filter((r) => r.statusCode === 201).length, 1, responses.map((r) => r.body).join('\n'));
    for (const response of responses.filter((r) => r.statusCode !== 201)) errorOf(response, 409, 'conflict');
  });
});
