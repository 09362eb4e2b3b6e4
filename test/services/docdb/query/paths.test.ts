import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseJson, type JsonObject } from '../../../../src/core/json.ts';
import { compilePath, valueAtCompiledPath, valueAtPath } from '../../../../src/services/docdb/query/paths.ts';

const doc: JsonObject = {
  id: 'a',
  n: 0,
  empty: '',
  nothing: null,
  tags: ['red', 'blue'],
  address: { city: 'Madrid', zip: '28001', geo: { lat: 40.4 } },
  items: [{ sku: 'x', qty: 2 }, { sku: 'y' }],
  matrix: [
    [1, 2],
    [3, 4],
  ],
  '': { '': 'empty names' },
  '12': 'twelve',
};

describe('valueAtPath', () => {
  it('selects object members, nested members and array elements', () => {
    assert.equal(valueAtPath(doc, 'id'), 'a');
    assert.equal(valueAtPath(doc, 'address.city'), 'Madrid');
    assert.equal(valueAtPath(doc, 'address.geo.lat'), 40.4);
    assert.deepEqual(valueAtPath(doc, 'address'), doc.address);
    assert.equal(valueAtPath(doc, 'tags.0'), 'red');
    assert.equal(valueAtPath(doc, 'tags.1'), 'blue');
    assert.equal(valueAtPath(doc, 'items.1.sku'), 'y');
    assert.equal(valueAtPath(doc, 'matrix.1.0'), 3);
    assert.equal(valueAtPath(doc, '12'), 'twelve');
    // Split on '.', an empty segment is the member named "".
    assert.deepEqual(valueAtPath(doc, ''), { '': 'empty names' });
    assert.equal(valueAtPath(doc, '.'), 'empty names');
  });

  it('returns present falsy values, null included', () => {
    assert.equal(valueAtPath(doc, 'n'), 0);
    assert.equal(valueAtPath(doc, 'empty'), '');
    assert.equal(valueAtPath(doc, 'nothing'), null);
  });

  it('is missing for absent members, out-of-range or non-canonical indexes and scalars', () => {
    for (const path of [
      'missing',
      'address.country',
      'tags.2',
      'tags.-1',
      'tags.01',
      'tags.00',
      'tags.+1',
      'tags.1.0',
      'tags.1e0',
      'tags. 1',
      'tags.1.5',
      'tags.99999999999999999999',
      'tags.length',
      'id.length',
      'id.0',
      'n.x',
      'nothing.x',
      'address.city.x',
      'matrix.2.0',
    ]) {
      assert.equal(valueAtPath(doc, path), undefined, path);
    }
  });

  it('does not continue through an array with a non-numeric segment', () => {
    assert.equal(valueAtPath(doc, 'items.sku'), undefined);
    assert.equal(valueAtPath(doc, 'tags.red'), undefined);
  });

  it('never reads inherited properties', () => {
    for (const path of ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'address.constructor', 'tags.map']) {
      assert.equal(valueAtPath(doc, path), undefined, path);
    }
    const withProto = parseJson('{"__proto__":{"x":1}}');
    assert.equal(valueAtPath(withProto, '__proto__.x'), 1);
  });

  it('starts from any value', () => {
    assert.equal(valueAtPath(['a', 'b'], '1'), 'b');
    assert.equal(valueAtPath(null, 'a'), undefined);
    assert.equal(valueAtPath('text', '0'), undefined);
    assert.equal(valueAtPath(5n, 'a'), undefined);
  });

  it('works the same from a compiled path', () => {
    const path = compilePath('items.0.sku');
    assert.deepEqual(path.segments, ['items', '0', 'sku']);
    assert.deepEqual(path.indexes, [-1, 0, -1]);
    assert.equal(valueAtCompiledPath(doc, path), 'x');
  });
});
