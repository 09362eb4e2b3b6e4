import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import type { TestService } from '../../helpers/service.ts';
import {
  as,
  assertError,
  call,
  createBucket,
  jsonOf,
  md5,
  sha256,
  startFiles,
  upload,
  UUID_V4,
  type FileBody,
} from './helpers.ts';

let service: TestService;
let limited: TestService;
before(async () => {
  service = await startFiles();
  limited = await startFiles({ maxUploadBytes: 10 });
});
after(async () => {
  await service.close();
  await limited.close();
});

const url = (bucket: string, path: string) => `/v1/buckets/${bucket}/files/${path}`;

describe('upload and download', () => {
  test('the reference example: 201 with the File object, hashes, text/plain; charset=utf-8', async () => {
    const bucket = await createBucket(service, 'alice');
    const file = await upload(service, 'alice', bucket.id, 'hello.txt', 'Hello, Stratus Files!', {
      'content-type': 'text/plain',
    });
    assert.deepEqual(Object.keys(file), [
      'id',
      'uuid',
      'created_timestamp',
      'updated_timestamp',
      'owners',
      'status',
      'size',
      'name',
      'bucket',
      'hash_md5',
      'hash_sha256',
      'mime_type',
    ]);
    assert.match(file.uuid!, UUID_V4);
    assert.equal(file.id, `file-${file.uuid}`);
    assert.equal(file.name, 'hello.txt');
    assert.equal(file.size, 21);
    assert.equal(file.status, 'available');
    assert.equal(file.bucket, bucket.id);
    assert.deepEqual(file.owners, ['alice']);
    assert.equal(file.mime_type, 'text/plain; charset=utf-8');
    assert.equal(file.hash_md5, '93e666b8248aa87395354fa64bd99f41');
    assert.equal(file.hash_sha256, '44216ec73e0a9b170c4ea093d4a86ba6c52e086917083b256ddc66fa1fc53a14');
    assert.equal(file.created_timestamp, file.updated_timestamp);

    const got = await call(service, 'GET', url(bucket.id, 'hello.txt'), as('alice'));
    assert.equal(got.statusCode, 200);
    assert.equal(got.body, 'Hello, Stratus Files!');
    assert.equal(got.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(got.headers['content-length'], '21');
    assert.equal(got.headers.etag, `"${file.hash_sha256}"`);
    assert.equal(got.headers['accept-ranges'], 'bytes');
    assert.equal(got.headers['x-content-type-options'], 'nosniff');
    assert.equal(got.headers['content-security-policy'], 'sandbox');
    assert.equal(got.headers['last-modified'], new Date(Math.floor(file.updated_timestamp / 1e6)).toUTCString());
  });

  test('binary content round-trips byte for byte; hashes match node:crypto', async () => {
    const bucket = await createBucket(service, 'bin');
    const content = Buffer.alloc(300_000);
    for (let i = 0; i < content.length; i++) content[i] = (i * 7919) % 256;
    const file = await upload(service, 'bin', bucket.id, 'data/blob.bin', content);
    assert.equal(file.size, content.length);
    assert.equal(file.hash_sha256, sha256(content));
    assert.equal(file.hash_md5, md5(content));
    const got = await call(service, 'GET', url(bucket.id, 'data/blob.bin'), as('bin'));
    assert.ok(got.rawPayload.equals(content));
  });

  test('an empty body makes an empty file; chunked bodies are accepted', async () => {
    const bucket = await createBucket(service, 'empty');
    const empty = await upload(service, 'empty', bucket.id, 'empty', '');
    assert.equal(empty.size, 0);
    assert.equal(empty.hash_sha256, sha256(''));
    assert.equal(empty.hash_md5, md5(''));
    const got = await call(service, 'GET', url(bucket.id, 'empty'), as('empty'));
    assert.equal(got.statusCode, 200);
    assert.equal(got.headers['content-length'], '0');
    assert.equal(got.body, '');
    // A stream payload goes without Content-Length (chunked).
    const chunks = ['part one, ', 'part two'];
    const response = await service.app.inject({
      method: 'PUT',
      url: url(bucket.id, 'chunked.txt'),
      headers: as('empty'),
      payload: Readable.from(chunks.map((c) => Buffer.from(c))),
    });
    const chunked = jsonOf<FileBody>(response, 201);
    assert.equal(chunked.size, 18);
    assert.equal(chunked.hash_sha256, sha256(chunks.join('')));
  });

  test('replacing: 200, keeps id/uuid/created_timestamp/owners, updates the rest; GET serves the new bytes', async () => {
    const bucket = await createBucket(service, 'rep');
    const first = await upload(service, 'rep', bucket.id, 'doc', 'version one', { 'content-type': 'text/plain' });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const second = await upload(service, 'rep', bucket.id, 'doc', Buffer.from('%PDF-1.7 new'), {}, 200);
    assert.equal(second.id, first.id);
    assert.equal(second.uuid, first.uuid);
    assert.equal(second.created_timestamp, first.created_timestamp);
    assert.ok(second.updated_timestamp > first.updated_timestamp);
    assert.equal(second.size, 12);
    assert.equal(second.mime_type, 'application/pdf');
    assert.equal(second.hash_sha256, sha256('%PDF-1.7 new'));
    assert.equal((await call(service, 'GET', url(bucket.id, 'doc'), as('rep'))).body, '%PDF-1.7 new');
    // The same content again: still 200, nothing else moves.
    const third = await upload(service, 'rep', bucket.id, 'doc', Buffer.from('%PDF-1.7 new'), {}, 200);
    assert.equal(third.hash_sha256, second.hash_sha256);
  });

  test('?metadata answers the File object; list items are the File object without uuid', async () => {
    const bucket = await createBucket(service, 'meta');
    const file = await upload(service, 'meta', bucket.id, 'a/b.txt', 'text');
    for (const query of ['?metadata', '?metadata=1', '?metadata=false']) {
      const meta = jsonOf<FileBody>(await call(service, 'GET', url(bucket.id, 'a/b.txt') + query, as('meta')));
      assert.deepEqual(meta, file);
    }
    const head = await call(service, 'HEAD', url(bucket.id, 'a/b.txt') + '?metadata', as('meta'));
    assert.equal(head.statusCode, 200);
    assert.match(String(head.headers['content-type']), /^application\/json/);
    assert.equal(head.body, '');
    const listed = jsonOf<FileBody[]>(await call(service, 'GET', `/v1/buckets/${bucket.id}/list/`, as('meta')));
    const { uuid: _uuid, ...withoutUuid } = file;
    assert.deepEqual(listed, [withoutUuid]);
  });

  test('paths: case-sensitive, stored exactly as decoded, may contain percent-encoded characters', async () => {
    const bucket = await createBucket(service, 'paths');
    await upload(service, 'paths', bucket.id, 'Dir/File.txt', 'upper');
    await upload(service, 'paths', bucket.id, 'dir/file.txt', 'lower');
    const spaced = await upload(service, 'paths', bucket.id, 'with%20space/%C3%A9t%C3%A9%3F.txt', 'encoded');
    assert.equal(spaced.name, 'with space/été?.txt');
    assert.equal((await call(service, 'GET', url(bucket.id, 'Dir/File.txt'), as('paths'))).body, 'upper');
    assert.equal((await call(service, 'GET', url(bucket.id, 'dir/file.txt'), as('paths'))).body, 'lower');
    assert.equal(
      (await call(service, 'GET', url(bucket.id, 'with%20space/%C3%A9t%C3%A9%3F.txt'), as('paths'))).body,
      'encoded',
    );
    assertError(await call(service, 'GET', url(bucket.id, 'DIR/FILE.TXT'), as('paths')), 404, 'not_found');
  });

  test('invalid paths → 400 validation_error on every method, and nothing is stored', async () => {
    const bucket = await createBucket(service, 'bad');
    const longest = 'x'.repeat(1024);
    await upload(service, 'bad', bucket.id, longest, 'ok');
    // Encoded so that no client or router normalises them away (raw `..` segments: test/e2e/files-http.test.ts).
    const invalid = [
      'a%2F%2Fb',
      '%2Fa',
      'a%2F',
      'a%2F..%2Fb',
      'a%2F.%2Fb',
      '..%2Fa',
      'a%2F..',
      '.%2Fa',
      'a%00b',
      'x'.repeat(1025),
      'é'.repeat(513),
      '%2F',
    ];
    for (const path of invalid) {
      assertError(await call(service, 'PUT', url(bucket.id, path), as('bad'), 'content'), 400, 'validation_error');
      assertError(await call(service, 'GET', url(bucket.id, path), as('bad')), 400, 'validation_error');
      assertError(await call(service, 'DELETE', url(bucket.id, path), as('bad')), 400, 'validation_error');
    }
    assertError(
      await call(service, 'PUT', `/v1/buckets/${bucket.id}/files/`, as('bad'), 'content'),
      400,
      'validation_error',
    );
    const listed = jsonOf<FileBody[]>(await call(service, 'GET', `/v1/buckets/${bucket.id}/list/`, as('bad')));
    assert.deepEqual(
      listed.map((f) => f.name),
      [longest],
    );
  });

  test('delete → 204 empty; then 404; deleting again → 404; unknown file → 404', async () => {
    const bucket = await createBucket(service, 'delf');
    await upload(service, 'delf', bucket.id, 'gone.txt', 'bye');
    const deleted = await call(service, 'DELETE', url(bucket.id, 'gone.txt'), as('delf'));
    assert.equal(deleted.statusCode, 204);
    assert.equal(deleted.body, '');
    assertError(await call(service, 'GET', url(bucket.id, 'gone.txt'), as('delf')), 404, 'not_found');
    assertError(await call(service, 'DELETE', url(bucket.id, 'gone.txt'), as('delf')), 404, 'not_found');
    assertError(await call(service, 'GET', url(bucket.id, 'never'), as('delf')), 404, 'not_found');
    const head = await call(service, 'HEAD', url(bucket.id, 'never'), as('delf'));
    assert.equal(head.statusCode, 404);
    assert.equal(head.body, '');
    // The path can be used again: a new file (201, new id).
    await upload(service, 'delf', bucket.id, 'gone.txt', 'again');
  });
});

describe('listing', () => {
  test('prefix at every depth, byte for byte, in first-upload order; * suffix stripped; [] when none', async () => {
    const bucket = await createBucket(service, 'lister');
    for (const path of ['notes/a.txt', 'b.txt', 'notes/2025/b.txt', 'notesX', 'Notes/c.txt', 'notes/z'])
      await upload(service, 'lister', bucket.id, path, path);
    // A replacement keeps its place (creation order = first upload).
    await upload(service, 'lister', bucket.id, 'notes/a.txt', 'changed', {}, 200);
    const names = async (suffix: string) =>
      jsonOf<FileBody[]>(await call(service, 'GET', `/v1/buckets/${bucket.id}/list${suffix}`, as('lister'))).map(
        (f) => f.name,
      );
    const all = ['notes/a.txt', 'b.txt', 'notes/2025/b.txt', 'notesX', 'Notes/c.txt', 'notes/z'];
    assert.deepEqual(await names('/'), all);
    assert.deepEqual(await names(''), all);
    assert.deepEqual(await names('/*'), all);
    assert.deepEqual(await names('/notes/'), ['notes/a.txt', 'notes/2025/b.txt', 'notes/z']);
    assert.deepEqual(await names('/notes/*'), ['notes/a.txt', 'notes/2025/b.txt', 'notes/z']);
    assert.deepEqual(await names('/notes'), ['notes/a.txt', 'notes/2025/b.txt', 'notesX', 'notes/z']);
    assert.deepEqual(await names('/notes/2025/'), ['notes/2025/b.txt']);
    assert.deepEqual(await names('/nothing/'), []);
    assert.deepEqual(await names('/NOTES/'), []);
    assertError(
      await call(service, 'GET', `/v1/buckets/${bucket.id}/list/a%00`, as('lister')),
      400,
      'validation_error',
    );
  });

  test('prefixes with multi-byte characters and LIKE wildcards match exactly', async () => {
    const bucket = await createBucket(service, 'lister2');
    for (const path of ['é/1', 'e/2', '%/3', '_/4', 'a_b/5', 'axb/6'])
      await upload(service, 'lister2', bucket.id, encodeURIComponent(path).replace(/%2F/g, '/'), 'x');
    const names = async (prefix: string) =>
      jsonOf<FileBody[]>(
        await call(service, 'GET', `/v1/buckets/${bucket.id}/list/${encodeURIComponent(prefix)}`, as('lister2')),
      ).map((f) => f.name);
    assert.deepEqual(await names('é'), ['é/1']);
    assert.deepEqual(await names('%'), ['%/3']);
    assert.deepEqual(await names('_'), ['_/4']);
    assert.deepEqual(await names('a_'), ['a_b/5']);
  });
});

describe('media types', () => {
  const cases: { name: string; body: Buffer | string; contentType?: string; expected: string }[] = [
    {
      name: 'png signature',
      body: Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'),
      contentType: 'text/plain',
      expected: 'image/png',
    },
    { name: 'pdf', body: '%PDF-1.4 hello', expected: 'application/pdf' },
    {
      name: 'html',
      body: '  <!DOCTYPE html><html></html>',
      contentType: 'text/plain',
      expected: 'text/html; charset=utf-8',
    },
    {
      name: 'json declared, text content',
      body: '{"a":1}',
      contentType: 'application/json',
      expected: 'application/json',
    },
    { name: 'css declared', body: 'body { color: red }', contentType: 'text/css', expected: 'text/css' },
    {
      name: 'csv declared with charset',
      body: 'a,b\n1,2\n',
      contentType: 'text/csv; charset=utf-8',
      expected: 'text/csv; charset=utf-8',
    },
    { name: 'text, no type', body: 'just words', expected: 'text/plain; charset=utf-8' },
    {
      name: 'text declared as a binary type',
      body: 'just words',
      contentType: 'application/zip',
      expected: 'text/plain; charset=utf-8',
    },
    {
      name: 'unknown binary, declared',
      body: Buffer.from([1, 2, 3, 0, 250]),
      contentType: 'application/x-custom',
      expected: 'application/x-custom',
    },
    { name: 'unknown binary, undeclared', body: Buffer.from([1, 2, 3, 0, 250]), expected: 'application/octet-stream' },
    {
      name: 'gzip',
      body: Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0]),
      contentType: 'application/octet-stream',
      expected: 'application/x-gzip',
    },
    { name: 'utf-16le BOM', body: Buffer.from([0xff, 0xfe, 0x41, 0x00]), expected: 'text/plain; charset=utf-16le' },
  ];
  for (const c of cases) {
    test(c.name, async () => {
      const owner = `mime-${c.name.replace(/[^a-z0-9]/gi, '')}`;
      const bucket = await createBucket(service, owner);
      const stored = await upload(
        service,
        owner,
        bucket.id,
        'f',
        c.body,
        c.contentType ? { 'content-type': c.contentType } : {},
      );
      assert.equal(stored.mime_type, c.expected);
      const got = await call(service, 'GET', url(bucket.id, 'f'), as(owner));
      assert.equal(got.headers['content-type'], c.expected);
    });
  }
});

test('an unparseable Content-Type → 415 and nothing is stored', async () => {
  const bucket = await createBucket(service, 'mime-bad');
  assertError(
    await call(service, 'PUT', url(bucket.id, 'f'), { ...as('mime-bad'), 'content-type': 'not a type' }, 'x'),
    415,
    'unsupported_media_type',
  );
  assertError(await call(service, 'GET', url(bucket.id, 'f'), as('mime-bad')), 404, 'not_found');
});

test('a download keeps the connection open; an upload refused before its end closes it', async () => {
  const bucket = await createBucket(limited, 'conn');
  await upload(limited, 'conn', bucket.id, 'f', 'x');
  const got = await call(limited, 'GET', url(bucket.id, 'f'), as('conn'));
  assert.notEqual(got.headers.connection, 'close');
  const refused = await limited.app.inject({
    method: 'PUT',
    url: url(bucket.id, 'g'),
    headers: { ...as('conn'), 'transfer-encoding': 'chunked' },
    payload: Readable.from([Buffer.alloc(8), Buffer.alloc(8), Buffer.alloc(8)]),
  });
  assertError(refused, 413, 'payload_too_large');
  assert.equal(refused.headers.connection, 'close');
});

describe('conditional and range requests', () => {
  let bucketId = '';
  let file: FileBody;
  const body = '0123456789abcdefghij';
  before(async () => {
    bucketId = (await createBucket(service, 'ranger')).id;
    file = await upload(service, 'ranger', bucketId, 'r.txt', body);
  });
  const get = (headers: Record<string, string>, method = 'GET') =>
    call(service, method, url(bucketId, 'r.txt'), { ...as('ranger'), ...headers });

  test('If-None-Match: the ETag, W/ ETag, a list containing it, or * → 304 with ETag and Last-Modified; other → 200', async () => {
    const etag = `"${file.hash_sha256}"`;
    for (const value of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      const response = await get({ 'if-none-match': value });
      assert.equal(response.statusCode, 304, value);
      assert.equal(response.body, '');
      assert.equal(response.headers.etag, etag);
      assert.ok(response.headers['last-modified']);
    }
    const changed = await get({ 'if-none-match': '"other"' });
    assert.equal(changed.statusCode, 200);
    assert.equal(changed.body, body);
    assert.equal((await get({ 'if-none-match': etag }, 'HEAD')).statusCode, 304);
  });

  test('If-Modified-Since: at or after Last-Modified → 304, before → 200; ignored beside If-None-Match', async () => {
    const lastModified = Date.parse(new Date(Math.floor(file.updated_timestamp / 1e6)).toUTCString());
    assert.equal((await get({ 'if-modified-since': new Date(lastModified).toUTCString() })).statusCode, 304);
    assert.equal((await get({ 'if-modified-since': new Date(lastModified + 60_000).toUTCString() })).statusCode, 304);
    assert.equal((await get({ 'if-modified-since': new Date(lastModified - 1000).toUTCString() })).statusCode, 200);
    assert.equal((await get({ 'if-modified-since': 'not a date' })).statusCode, 200);
    assert.equal(
      (await get({ 'if-modified-since': new Date(lastModified + 60_000).toUTCString(), 'if-none-match': '"other"' }))
        .statusCode,
      200,
    );
  });

  test('one range → 206 with Content-Range and the slice', async () => {
    const cases: [string, number, number][] = [
      ['bytes=0-4', 0, 4],
      ['bytes=5-', 5, 19],
      ['bytes=-5', 15, 19],
      ['bytes=10-1000', 10, 19],
      ['bytes=-100', 0, 19],
      ['bytes=19-19', 19, 19],
    ];
    for (const [range, start, end] of cases) {
      const response = await get({ range });
      assert.equal(response.statusCode, 206, range);
      assert.equal(response.headers['content-range'], `bytes ${start}-${end}/20`);
      assert.equal(response.headers['content-length'], String(end - start + 1));
      assert.equal(response.body, body.slice(start, end + 1));
      const head = await get({ range }, 'HEAD');
      assert.equal(head.statusCode, 206);
      assert.equal(head.headers['content-range'], `bytes ${start}-${end}/20`);
      assert.equal(head.body, '');
    }
  });

  test('unsatisfiable → 416 with Content-Range: bytes */size; several ranges or a malformed one → 200 whole', async () => {
    for (const range of ['bytes=20-', 'bytes=25-30', 'bytes=-0']) {
      const response = await get({ range });
      assertError(response, 416, 'range_not_satisfiable');
      assert.equal(response.headers['content-range'], 'bytes */20');
    }
    for (const range of ['bytes=0-1,3-4', 'bytes=5-2', 'items=0-1', 'bytes=a-b', 'bytes=', 'garbage']) {
      const response = await get({ range });
      assert.equal(response.statusCode, 200, range);
      assert.equal(response.body, body);
      assert.equal(response.headers['content-range'], undefined);
    }
  });

  test('If-Range: a matching strong ETag or exact date applies the range; otherwise the whole file', async () => {
    const etag = `"${file.hash_sha256}"`;
    const lastModified = new Date(Math.floor(file.updated_timestamp / 1e6)).toUTCString();
    assert.equal((await get({ range: 'bytes=0-1', 'if-range': etag })).statusCode, 206);
    assert.equal((await get({ range: 'bytes=0-1', 'if-range': lastModified })).statusCode, 206);
    for (const ifRange of ['"stale"', `W/${etag}`, new Date(Date.parse(lastModified) - 1000).toUTCString()]) {
      const response = await get({ range: 'bytes=0-1', 'if-range': ifRange });
      assert.equal(response.statusCode, 200, ifRange);
      assert.equal(response.body, body);
    }
  });

  test('a file of several MiB (read in pieces): whole, and ranges across piece boundaries', async () => {
    const MIB = 1024 * 1024;
    // Not a multiple of the piece size, with every byte position distinguishable.
    const large = Buffer.alloc(5 * MIB + 12_345);
    for (let i = 0; i + 4 <= large.length; i += 4) large.writeUInt32LE(i, i);
    const stored = await upload(service, 'ranger', bucketId, 'large.bin', large);
    assert.equal(stored.hash_sha256, sha256(large));
    const whole = await call(service, 'GET', url(bucketId, 'large.bin'), as('ranger'));
    assert.equal(whole.statusCode, 200);
    assert.equal(whole.headers['content-length'], String(large.length));
    assert.equal(whole.headers.etag, `"${stored.hash_sha256}"`);
    assert.ok(whole.rawPayload.equals(large));
    const ranges: [number, number][] = [
      [MIB - 3, 3 * MIB + 7],
      [0, 4 * MIB],
      [5 * MIB - 1, large.length - 1],
      [17, 17],
    ];
    for (const [start, end] of ranges) {
      const part = await call(service, 'GET', url(bucketId, 'large.bin'), {
        ...as('ranger'),
        range: `bytes=${start}-${end}`,
      });
      assert.equal(part.statusCode, 206, `${start}-${end}`);
      assert.equal(part.headers['content-range'], `bytes ${start}-${end}/${large.length}`);
      assert.equal(part.headers['content-length'], String(end - start + 1));
      assert.ok(part.rawPayload.equals(large.subarray(start, end + 1)), `${start}-${end}`);
    }
  });

  test('an empty file: any range is 416', async () => {
    await upload(service, 'ranger', bucketId, 'zero', '');
    const response = await call(service, 'GET', url(bucketId, 'zero'), { ...as('ranger'), range: 'bytes=0-' });
    assertError(response, 416, 'range_not_satisfiable');
    assert.equal(response.headers['content-range'], 'bytes */0');
  });
});

describe('limits and timestamps', () => {
  test('Content-Length over the limit → 413 before reading; chunked over the limit → 413; nothing stored', async () => {
    const bucket = await createBucket(limited, 'lim');
    assert.equal((await upload(limited, 'lim', bucket.id, 'ten', '0123456789')).size, 10);
    assertError(
      await call(limited, 'PUT', url(bucket.id, 'eleven'), as('lim'), '0123456789a'),
      413,
      'payload_too_large',
    );
    const chunked = await limited.app.inject({
      method: 'PUT',
      url: url(bucket.id, 'chunked'),
      headers: as('lim'),
      payload: Readable.from([Buffer.from('012345'), Buffer.from('6789ab')]),
    });
    assertError(chunked, 413, 'payload_too_large');
    // A replacement over the limit leaves the old content.
    assertError(
      await call(limited, 'PUT', url(bucket.id, 'ten'), as('lim'), 'way too long for it'),
      413,
      'payload_too_large',
    );
    const listed = jsonOf<FileBody[]>(await call(limited, 'GET', `/v1/buckets/${bucket.id}/list/`, as('lim')));
    assert.deepEqual(
      listed.map((f) => f.name),
      ['ten'],
    );
    assert.equal((await call(limited, 'GET', url(bucket.id, 'ten'), as('lim'))).body, '0123456789');
  });

  test('nanosecond timestamps above 2^53 are written as exact integers', async () => {
    let next = 1782045600123456789n;
    const exact = await startFiles({ clock: () => next++ });
    try {
      const bucketResponse = await call(exact, 'POST', '/v1/buckets', as('ns'), { name: 'ns' });
      assert.match(bucketResponse.body, /"created_timestamp":1782045600123456789[,}]/);
      const bucketId = bucketResponse.json<{ id: string }>().id;
      const list = await call(exact, 'GET', '/v1/buckets', as('ns'));
      assert.match(list.body, /"created_timestamp":1782045600123456789,"created_h":"2026-06-21T12:40:00.123456789Z"/);
      const uploaded = await call(exact, 'PUT', url(bucketId, 'f'), as('ns'), 'x');
      assert.match(uploaded.body, /"created_timestamp":1782045600123456790,"updated_timestamp":1782045600123456790,/);
      const replaced = await call(exact, 'PUT', url(bucketId, 'f'), as('ns'), 'y');
      assert.match(replaced.body, /"created_timestamp":1782045600123456790,"updated_timestamp":1782045600123456791,/);
      const meta = await call(exact, 'GET', url(bucketId, 'f') + '?metadata', as('ns'));
      assert.match(meta.body, /"updated_timestamp":1782045600123456791,/);
      const listed = await call(exact, 'GET', `/v1/buckets/${bucketId}/list/`, as('ns'));
      assert.match(listed.body, /"created_timestamp":1782045600123456790,"updated_timestamp":1782045600123456791,/);
      // Still valid JSON.
      assert.equal(JSON.parse(listed.body).length, 1);
      const got = await call(exact, 'GET', url(bucketId, 'f'), as('ns'));
      assert.equal(got.headers['last-modified'], 'Sun, 21 Jun 2026 12:40:00 GMT');
    } finally {
      await exact.close();
    }
  });
});
