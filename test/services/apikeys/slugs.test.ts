import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RESERVED_SLUGS, isReservedSlug, slugify, withRandomSuffix } from '../../../src/services/apikeys/slugs.ts';

const SLUG = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

test('slugify lower-cases and collapses other characters into single hyphens', () => {
  assert.equal(slugify('My Project'), 'my-project');
  assert.equal(slugify('--Hello,   World!--'), 'hello-world');
  assert.equal(slugify('v2.0_release'), 'v2-0-release');
  assert.equal(slugify('Ünïcödé Straße'), 'unicode-stra-e');
  assert.equal(slugify('日本語'), '');
  assert.equal(slugify('   '), '');
});

test('slugify cuts to 63 characters without a trailing hyphen', () => {
  assert.equal(slugify('a'.repeat(100)), 'a'.repeat(63));
  assert.equal(slugify(`${'a'.repeat(62)} b`), 'a'.repeat(62));
});

test('withRandomSuffix keeps a valid label of at most 63 characters', () => {
  for (const base of ['', 'x', 'my-project', 'a'.repeat(63), `${'a'.repeat(57)}-bbbbb`]) {
    const slug = withRandomSuffix(base);
    assert.match(slug, SLUG, slug);
    assert.ok(slug.length <= 63);
    assert.match(slug, /-[a-z0-9]{4}$/);
  }
  assert.match(withRandomSuffix(''), /^project-[a-z0-9]{4}$/);
  const seen = new Set(Array.from({ length: 50 }, () => withRandomSuffix('x')));
  assert.ok(seen.size > 45, 'suffixes are random');
});

test('the reserved names are exactly the platform hosts', () => {
  assert.deepEqual([...RESERVED_SLUGS].sort(), [
    'api',
    'apikeys',
    'auth',
    'config',
    'console',
    'docdb',
    'files',
    'gateway',
    'kv',
    'lambda',
    'logs',
    'run',
    'scheduler',
  ]);
  assert.equal(isReservedSlug('api'), true);
  assert.equal(isReservedSlug('apis'), false);
});
