import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { digestProblem, isRepositoryName, isTag } from '../../../src/services/run/names.ts';
import { parseRegistryPath, registryPathOf } from '../../../src/services/run/registry/paths.ts';

const DIGEST = `sha256:${'a'.repeat(64)}`;

describe('run names (run.md §2)', () => {
  it('accepts repository names of lower-case components with single separators, at most 255 characters', () => {
    for (const name of ['a', 'my-project/my-app', 'a.b', 'a_b', 'a__b', 'a---b', 'x/y/z', 'a'.repeat(255)])
      assert.ok(isRepositoryName(name), name);
    for (const name of [
      '',
      'A',
      'a/',
      '/a',
      'a//b',
      'a.',
      '.a',
      'a..b',
      'a___b',
      'a-',
      'a b',
      'a:b',
      'a'.repeat(256),
      `${'a'.repeat(127)}/${'b'.repeat(128)}`,
    ]) {
      assert.ok(!isRepositoryName(name), name);
    }
  });

  it('accepts tags of up to 128 characters not starting with . or -', () => {
    for (const tag of ['latest', 'v1.0.0', '_x', 'A-b_c.d', 'a'.repeat(128)]) assert.ok(isTag(tag), tag);
    for (const tag of ['', '.v1', '-v1', 'a/b', 'a:b', 'a'.repeat(129)]) assert.ok(!isTag(tag), tag);
  });

  it('accepts sha256 digests only, saying why others are refused', () => {
    assert.equal(digestProblem(DIGEST), null);
    assert.match(digestProblem(undefined) ?? '', /missing/);
    assert.match(digestProblem(`sha512:${'a'.repeat(128)}`) ?? '', /not supported/);
    assert.match(digestProblem(`sha256:${'A'.repeat(64)}`) ?? '', /not a digest/);
    assert.match(digestProblem('sha256:abc') ?? '', /not a digest/);
  });
});

describe('registry paths are parsed from their end', () => {
  it('splits names with slashes from uploads, blobs and manifests', () => {
    assert.deepEqual(parseRegistryPath('GET', ''), { kind: 'base' });
    assert.deepEqual(parseRegistryPath('GET', '_catalog'), { kind: 'catalog' });
    assert.deepEqual(parseRegistryPath('POST', 'a/b/blobs/uploads/'), { kind: 'uploads', name: 'a/b' });
    assert.deepEqual(parseRegistryPath('PATCH', 'a/b/blobs/uploads/u-1'), { kind: 'upload', name: 'a/b', uuid: 'u-1' });
    assert.deepEqual(parseRegistryPath('HEAD', `a/b/blobs/${DIGEST}`), { kind: 'blob', name: 'a/b', digest: DIGEST });
    assert.deepEqual(parseRegistryPath('PUT', 'a/b/manifests/v1'), { kind: 'manifest', name: 'a/b', reference: 'v1' });
    assert.deepEqual(parseRegistryPath('GET', 'a/b/tags/list'), { kind: 'tags', name: 'a/b' });
    // Components named like the keywords stay part of the name.
    assert.deepEqual(parseRegistryPath('PUT', 'blobs/manifests/manifests/v1'), {
      kind: 'manifest',
      name: 'blobs/manifests',
      reference: 'v1',
    });
    assert.deepEqual(parseRegistryPath('POST', 'x/blobs/uploads/blobs/uploads/'), {
      kind: 'uploads',
      name: 'x/blobs/uploads',
    });
    assert.deepEqual(parseRegistryPath('GET', 'just-a-name'), { kind: 'unknown' });
  });

  it('decodes percent-encoding and drops the query', () => {
    assert.equal(registryPathOf(`/v2/a/blobs/sha256%3A${'a'.repeat(64)}?x=1`), `a/blobs/${DIGEST}`);
    assert.equal(registryPathOf('/v2/'), '');
    assert.equal(registryPathOf('/v2/%E0%A4%A'), null);
  });
});
