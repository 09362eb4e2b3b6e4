import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestService } from '../../helpers/service.ts';
import {
  as,
  assertError,
  call,
  createBucket,
  jsonOf,
  startFiles,
  upload,
  UUID_V4,
  type BucketBody,
} from './helpers.ts';

let service: TestService;
before(async () => {
  service = await startFiles();
});
after(async () => {
  await service.close();
});

interface ListItem {
  id: string;
  name: string;
  description: string;
  created_timestamp: number;
  created_h: string;
  owners: string[];
}

describe('buckets', () => {
  test('create → 201 with the Bucket object; get; list in creation order with created_h', async () => {
    const first = await createBucket(service, 'u-create', {
      name: '  photos_2025-a  ',
      description: 'holiday pictures',
    });
    assert.deepEqual(Object.keys(first), ['id', 'project_id', 'created_timestamp', 'owners', 'name', 'description']);
    assert.match(first.id, /^bucket-/);
    assert.match(first.id.slice('bucket-'.length), UUID_V4);
    assert.equal(first.name, 'photos_2025-a', 'the name is trimmed');
    assert.equal(first.description, 'holiday pictures');
    assert.deepEqual(first.owners, ['u-create']);
    assert.equal(first.project_id, '');
    assert.ok(Number.isInteger(first.created_timestamp) && first.created_timestamp > 1.7e18, 'nanoseconds');
    const second = await createBucket(service, 'u-create', { name: 'second' });
    assert.ok(second.created_timestamp >= first.created_timestamp);

    assert.deepEqual(jsonOf<BucketBody>(await call(service, 'GET', `/v1/buckets/${first.id}`, as('u-create'))), first);
    const list = jsonOf<ListItem[]>(await call(service, 'GET', '/v1/buckets', as('u-create')));
    assert.deepEqual(
      list.map((b) => b.id),
      [first.id, second.id],
    );
    assert.deepEqual(Object.keys(list[0]!), ['id', 'name', 'description', 'created_timestamp', 'created_h', 'owners']);
    // Exact digits from the raw text (a JS number would round them).
    const raw = (await call(service, 'GET', '/v1/buckets', as('u-create'))).body;
    const exact = BigInt(/"created_timestamp":(\d+)/.exec(raw)![1]!);
    assert.equal(BigInt(Date.parse(list[0]!.created_h)) * 1_000_000n, exact, 'created_h is the same instant');
    assert.match(list[0]!.created_h, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    assert.deepEqual(jsonOf(await call(service, 'GET', '/v1/buckets', as('u-nobody'))), []);
  });

  test('an empty body (or {}) creates a bucket named by its id; description defaults to ""', async () => {
    const empty = jsonOf<BucketBody>(
      await service.app.inject({ method: 'POST', url: '/v1/buckets', headers: as('u-empty') }),
      201,
    );
    assert.equal(empty.name, empty.id);
    assert.equal(empty.description, '');
    const braces = await createBucket(service, 'u-empty', {});
    assert.equal(braces.name, braces.id);
    const blank = await createBucket(service, 'u-empty', { name: '   ' });
    assert.equal(blank.name, blank.id);
  });

  test('project_id comes from X-Project-Id, else the identity project, else ""', async () => {
    const fromHeader = await jsonOf<BucketBody>(
      await call(service, 'POST', '/v1/buckets', { ...as('u-proj'), 'x-project-id': 'proj-h' }, { name: 'a' }),
      201,
    );
    assert.equal(fromHeader.project_id, 'proj-h');
    const fromIdentity = jsonOf<BucketBody>(
      await call(service, 'POST', '/v1/buckets', as('u-proj', { project: { id: 'proj-i' } }), { name: 'b' }),
      201,
    );
    assert.equal(fromIdentity.project_id, 'proj-i');
    const list = jsonOf<Record<string, unknown>[]>(await call(service, 'GET', '/v1/buckets', as('u-proj')));
    assert.ok(
      list.every((item) => !('project_id' in item)),
      'list items carry no project_id',
    );
  });

  test('validation: name characters and length, description length and type, unknown fields, invalid JSON', async () => {
    assertError(
      await call(service, 'POST', '/v1/buckets', as('u-val'), { name: 'has space' }),
      400,
      'validation_error',
    );
    assertError(await call(service, 'POST', '/v1/buckets', as('u-val'), { name: 'dot.name' }), 400, 'validation_error');
    assertError(
      await call(service, 'POST', '/v1/buckets', as('u-val'), { name: 'x'.repeat(65) }),
      400,
      'validation_error',
    );
    assert.equal((await call(service, 'POST', '/v1/buckets', as('u-val'), { name: 'x'.repeat(64) })).statusCode, 201);
    assertError(
      await call(service, 'POST', '/v1/buckets', as('u-val'), { name: 'ok', description: 'd'.repeat(4097) }),
      400,
      'validation_error',
    );
    assert.equal(
      (await call(service, 'POST', '/v1/buckets', as('u-val'), { name: 'okd', description: 'é'.repeat(4096) }))
        .statusCode,
      201,
    );
    assertError(await call(service, 'POST', '/v1/buckets', as('u-val'), { name: 12 }), 400, 'validation_error');
    assertError(
      await call(service, 'POST', '/v1/buckets', as('u-val'), { name: 'n', extra: true }),
      400,
      'validation_error',
    );
    assertError(await call(service, 'POST', '/v1/buckets', as('u-val'), '{"name":'), 400, 'invalid_json');
    assertError(await call(service, 'POST', '/v1/buckets', as('u-val'), '[1]'), 400, 'validation_error');
    const names = jsonOf<ListItem[]>(await call(service, 'GET', '/v1/buckets', as('u-val'))).map((b) => b.name);
    assert.deepEqual(names, ['x'.repeat(64), 'okd'], 'invalid requests created nothing');
  });

  test('same name for the same owner → 409; another owner may use it', async () => {
    await createBucket(service, 'u-dup', { name: 'shared' });
    const message = assertError(
      await call(service, 'POST', '/v1/buckets', as('u-dup'), { name: ' shared ' }),
      409,
      'conflict',
    );
    assert.match(message, /bucket already exists/);
    await createBucket(service, 'u-dup2', { name: 'shared' });
  });

  test('401 on every endpoint without a usable identity', async () => {
    const bucket = await createBucket(service, 'u-auth');
    const bad = { 'x-gateway-authentication': '{"user":{}}' };
    for (const headers of [{}, bad, { 'x-gateway-authentication': 'not json' }]) {
      assertError(await call(service, 'GET', '/v1/buckets', headers), 401, 'unauthorized');
      assertError(await call(service, 'POST', '/v1/buckets', headers, '{"name":'), 401, 'unauthorized');
      assertError(await call(service, 'GET', `/v1/buckets/${bucket.id}`, headers), 401, 'unauthorized');
      assertError(await call(service, 'PATCH', `/v1/buckets/${bucket.id}`, headers, {}), 401, 'unauthorized');
      assertError(await call(service, 'DELETE', `/v1/buckets/${bucket.id}`, headers), 401, 'unauthorized');
      assertError(
        await call(service, 'PUT', `/v1/buckets/${bucket.id}/files/a.txt`, headers, 'x'),
        401,
        'unauthorized',
      );
      assertError(await call(service, 'GET', `/v1/buckets/${bucket.id}/files/a.txt`, headers), 401, 'unauthorized');
      assertError(await call(service, 'DELETE', `/v1/buckets/${bucket.id}/files/a.txt`, headers), 401, 'unauthorized');
      assertError(await call(service, 'GET', `/v1/buckets/${bucket.id}/list/`, headers), 401, 'unauthorized');
      const head = await call(service, 'HEAD', `/v1/buckets/${bucket.id}/files/a.txt`, headers);
      assert.equal(head.statusCode, 401);
      assert.equal(head.body, '');
    }
  });

  test("another user's bucket, or an unknown one, is 404 everywhere", async () => {
    const bucket = await createBucket(service, 'u-owner');
    await upload(service, 'u-owner', bucket.id, 'secret.txt', 'secret');
    for (const id of [bucket.id, 'bucket-00000000-0000-4000-8000-000000000000', 'nonsense']) {
      const who = as(id === bucket.id ? 'u-intruder' : 'u-owner');
      assertError(await call(service, 'GET', `/v1/buckets/${id}`, who), 404, 'not_found');
      assertError(await call(service, 'DELETE', `/v1/buckets/${id}`, who), 404, 'not_found');
      assertError(await call(service, 'PUT', `/v1/buckets/${id}/files/secret.txt`, who, 'overwrite'), 404, 'not_found');
      assertError(await call(service, 'GET', `/v1/buckets/${id}/files/secret.txt`, who), 404, 'not_found');
      assertError(await call(service, 'GET', `/v1/buckets/${id}/files/secret.txt?metadata`, who), 404, 'not_found');
      assertError(await call(service, 'DELETE', `/v1/buckets/${id}/files/secret.txt`, who), 404, 'not_found');
      assertError(await call(service, 'GET', `/v1/buckets/${id}/list/`, who), 404, 'not_found');
      const head = await call(service, 'HEAD', `/v1/buckets/${id}/files/secret.txt`, who);
      assert.equal(head.statusCode, 404);
      assert.equal(head.body, '');
    }
    // The owner still has it, unchanged.
    const got = await call(service, 'GET', `/v1/buckets/${bucket.id}/files/secret.txt`, as('u-owner'));
    assert.equal(got.body, 'secret');
  });

  test('PATCH → 501 after authentication, whatever the body, and nothing changes', async () => {
    const bucket = await createBucket(service, 'u-patch', { name: 'keep' });
    assertError(
      await call(service, 'PATCH', `/v1/buckets/${bucket.id}`, as('u-patch'), { name: 'changed' }),
      501,
      'not_implemented',
    );
    assertError(
      await call(service, 'PATCH', `/v1/buckets/${bucket.id}`, as('u-patch'), '{broken'),
      501,
      'not_implemented',
    );
    assert.equal(
      jsonOf<BucketBody>(await call(service, 'GET', `/v1/buckets/${bucket.id}`, as('u-patch'))).name,
      'keep',
    );
  });

  test('known path with another method → 405 with Allow; unknown path → 404', async () => {
    const bucket = await createBucket(service, 'u-405');
    const put = await call(service, 'PUT', '/v1/buckets', as('u-405'));
    assertError(put, 405, 'method_not_allowed');
    assert.match(String(put.headers.allow), /GET/);
    assertError(await call(service, 'POST', `/v1/buckets/${bucket.id}`, as('u-405')), 405, 'method_not_allowed');
    assertError(
      await call(service, 'POST', `/v1/buckets/${bucket.id}/files/a`, as('u-405'), 'x'),
      405,
      'method_not_allowed',
    );
    assertError(
      await call(service, 'DELETE', `/v1/buckets/${bucket.id}/list/`, as('u-405')),
      405,
      'method_not_allowed',
    );
    assertError(await call(service, 'GET', `/v1/nothing`, as('u-405')), 404, 'not_found');
  });

  test('delete → 200 with the bucket as it was; its files go with it; then 404', async () => {
    const bucket = await createBucket(service, 'u-del', { name: 'doomed', description: 'bye' });
    await upload(service, 'u-del', bucket.id, 'a.txt', 'a');
    await upload(service, 'u-del', bucket.id, 'dir/b.txt', 'b');
    const deleted = jsonOf<BucketBody>(await call(service, 'DELETE', `/v1/buckets/${bucket.id}`, as('u-del')));
    assert.deepEqual(deleted, bucket);
    assertError(await call(service, 'GET', `/v1/buckets/${bucket.id}`, as('u-del')), 404, 'not_found');
    assertError(await call(service, 'GET', `/v1/buckets/${bucket.id}/files/a.txt`, as('u-del')), 404, 'not_found');
    assertError(await call(service, 'GET', `/v1/buckets/${bucket.id}/list/`, as('u-del')), 404, 'not_found');
    assertError(await call(service, 'DELETE', `/v1/buckets/${bucket.id}`, as('u-del')), 404, 'not_found');
    const rows = await service.store.sql.pool?.query(
      'select count(*)::int as n from files_files where bucket_id = $1',
      [bucket.id],
    );
    if (rows) assert.equal(rows.rows[0].n, 0);
    // The name is free again.
    await createBucket(service, 'u-del', { name: 'doomed' });
  });

  test('the OpenAPI document lists every endpoint', async () => {
    const doc = jsonOf<{ paths: Record<string, Record<string, unknown>> }>(await call(service, 'GET', '/openapi.json'));
    assert.deepEqual(Object.keys(doc.paths['/v1/buckets']!).sort(), ['get', 'post']);
    assert.deepEqual(Object.keys(doc.paths['/v1/buckets/{bucket_id}']!).sort(), ['delete', 'get', 'patch']);
    assert.deepEqual(
      Object.keys(doc.paths['/v1/buckets/{bucket_id}/files/{path}']!)
        .sort()
        .filter((m) => m !== 'head'),
      ['delete', 'get', 'put'],
    );
    assert.ok(doc.paths['/v1/buckets/{bucket_id}/list/{path}']?.get);
  });
});
