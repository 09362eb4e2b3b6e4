import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough, Readable } from 'node:stream';
import { BlobRefs } from '../../../src/store/blob/refs.ts';
import { first as firstRow } from '../../../src/store/sql-work.ts';
import type { TestService } from '../../helpers/service.ts';
import {
  as,
  assertError,
  call,
  createBucket,
  jsonOf,
  pendingUploads,
  sha256,
  startFiles,
  storedBlobs,
  upload,
  waitUntil,
  type FileBody,
} from './helpers.ts';
import { within } from '../../helpers/waiting.ts';

// A sweeper with a 1 s grace period that runs every 10 ms: blobs that lose their last reference
// go a second later, so each test can watch the store. The grace period also bounds an upload's
// put → commit (past it the upload answers a retryable 503), which a loaded machine can stretch
// well past 100 ms.
let service: TestService;
before(async () => {
  service = await startFiles({ blobRefs: { graceMs: 1000, sweepIntervalMs: 10 } });
});
after(async () => {
  await service.close();
});

const url = (bucket: string, path: string) => `/v1/buckets/${bucket}/files/${path}`;
const hasBlob = async (sha: string) => (await storedBlobs(service)).includes(sha);
const gone = (sha: string) =>
  waitUntil(async () => !(await hasBlob(sha)), 10_000, `blob ${sha.slice(0, 8)} to be swept`);
const candidates = async (sha: string) => {
  const row = await service.store.sql.database.read(() =>
    firstRow<{ n: number | string }>('select count(*) as n from stratus_blob_candidates where sha256 = ?', sha),
  );
  return Number(row?.n ?? 0);
};
/** Waits until the sweeper has decided on every deletion candidate of this blob: each came due and was dropped (still referenced) or swept. */
const decided = (sha: string) =>
  waitUntil(async () => (await candidates(sha)) === 0, 10_000, `the sweeper to decide on blob ${sha.slice(0, 8)}`);
/** Long enough for several sweeper passes. */
const severalSweeps = () => new Promise((resolve) => setTimeout(resolve, 250));

describe('content storage and blob references', () => {
  test('identical content is one blob, kept while any file uses it', async () => {
    const bucket = await createBucket(service, 's-share');
    const other = await createBucket(service, 's-share', { name: 'other' });
    const content = 'shared content for two files';
    const a = await upload(service, 's-share', bucket.id, 'a', content);
    const b = await upload(service, 's-share', other.id, 'b', content);
    assert.equal(a.hash_sha256, b.hash_sha256);
    assert.equal((await storedBlobs(service)).filter((s) => s === a.hash_sha256).length, 1);

    assert.equal((await call(service, 'DELETE', url(bucket.id, 'a'), as('s-share'))).statusCode, 204);
    await decided(a.hash_sha256);
    assert.ok(await hasBlob(a.hash_sha256), 'still used by b');
    assert.equal((await call(service, 'GET', url(other.id, 'b'), as('s-share'))).body, content);

    assert.equal((await call(service, 'DELETE', url(other.id, 'b'), as('s-share'))).statusCode, 204);
    await gone(a.hash_sha256);
  });

  test('a replacement releases the old content; the new one stays', async () => {
    const bucket = await createBucket(service, 's-rep');
    const first = await upload(service, 's-rep', bucket.id, 'f', 'first version');
    const second = await upload(service, 's-rep', bucket.id, 'f', 'second version', {}, 200);
    await gone(first.hash_sha256);
    await severalSweeps();
    assert.ok(await hasBlob(second.hash_sha256));
    assert.equal((await call(service, 'GET', url(bucket.id, 'f'), as('s-rep'))).body, 'second version');
  });

  test('deleting a bucket releases its files’ content, but not content another holder references', async () => {
    const bucket = await createBucket(service, 's-bucket');
    const own = await upload(service, 's-bucket', bucket.id, 'x/own', 'only in this bucket');
    const shared = await upload(service, 's-bucket', bucket.id, 'x/shared', 'also a registry layer');
    // Another service (say the registry) references the second blob under its own holder.
    const refs = new BlobRefs(service.store.sql, service.store.blobs);
    const pin = await refs.pin(shared.hash_sha256);
    await service.store.sql.database.write(() => refs.addWork(pin, 'registry:layer-1'));

    jsonOf(await call(service, 'DELETE', `/v1/buckets/${bucket.id}`, as('s-bucket')));
    await gone(own.hash_sha256);
    await decided(shared.hash_sha256);
    assert.ok(await hasBlob(shared.hash_sha256), 'the registry still holds it');
    assert.equal(await refs.countRefs(shared.hash_sha256), 1);
  });

  test('an upload refused for its size stores nothing: no file, no blob, no temp file', async () => {
    const limited = await startFiles({ maxUploadBytes: 1000, blobRefs: { graceMs: 100, sweepIntervalMs: 10 } });
    try {
      const bucket = await createBucket(limited, 's-limit');
      const body = Buffer.alloc(5000, 7);
      const response = await limited.app.inject({
        method: 'PUT',
        url: url(bucket.id, 'big'),
        headers: as('s-limit'),
        payload: Readable.from([body.subarray(0, 600), body.subarray(600)]),
      });
      assertError(response, 413, 'payload_too_large');
      assert.deepEqual(await storedBlobs(limited), []);
      assert.equal(await pendingUploads(limited), 0);
      assert.deepEqual(jsonOf(await call(limited, 'GET', `/v1/buckets/${bucket.id}/list/`, as('s-limit'))), []);
    } finally {
      await limited.close();
    }
  });

  test('an upload whose bucket is deleted while the body streams → 404, and its blob is swept', async () => {
    const bucket = await createBucket(service, 's-race');
    const content = 'the first half, and the rest after the bucket is gone';
    const blobs = service.store.blobs;
    const { put } = blobs;
    // Seen from the server: the first bytes reaching the store (the upload is past its bucket
    // check), and the content the store then holds.
    let firstBytes!: () => void;
    const reading = new Promise<void>((resolve) => (firstBytes = resolve));
    const stored: string[] = [];
    blobs.put = async (source, options) => {
      const watched = async function* () {
        for await (const chunk of source as AsyncIterable<Uint8Array>) {
          firstBytes();
          yield chunk;
        }
      };
      const info = await put.call(blobs, watched(), options);
      stored.push(info.sha256);
      return info;
    };
    try {
      const body = new PassThrough();
      const pending = service.app.inject({
        method: 'PUT',
        url: url(bucket.id, 'late'),
        headers: as('s-race'),
        payload: body,
      });
      body.write('the first half, ');
      await within(reading, 'the first half to reach the store');
      jsonOf(await call(service, 'DELETE', `/v1/buckets/${bucket.id}`, as('s-race')));
      body.end('and the rest after the bucket is gone');
      assertError(await pending, 404, 'not_found');
    } finally {
      blobs.put = put;
    }
    // The whole content was stored before the upload found its bucket gone; nothing holds it.
    assert.deepEqual(stored, [sha256(content)]);
    await gone(sha256(content));
  });

  test('content missing from the store → 500 internal_error, no details leaked', async () => {
    const bucket = await createBucket(service, 's-lost');
    const file = await upload(service, 's-lost', bucket.id, 'lost', 'content that will be lost');
    assert.ok(await service.store.blobs.delete(file.hash_sha256));
    const response = await call(service, 'GET', url(bucket.id, 'lost'), as('s-lost'));
    const message = assertError(response, 500, 'internal_error');
    assert.ok(!message.includes(file.hash_sha256));
    // Metadata is still answered.
    assert.equal(
      jsonOf<FileBody>(await call(service, 'GET', url(bucket.id, 'lost') + '?metadata', as('s-lost'))).id,
      file.id,
    );
  });

  test('the same content under many paths, deleted one by one: the blob goes with the last', async () => {
    const bucket = await createBucket(service, 's-many');
    const files: FileBody[] = [];
    for (let i = 0; i < 5; i++)
      files.push(await upload(service, 's-many', bucket.id, `copy-${i}`, 'same bytes everywhere'));
    for (const file of files.slice(0, 4))
      assert.equal((await call(service, 'DELETE', url(bucket.id, file.name), as('s-many'))).statusCode, 204);
    await decided(files[0]!.hash_sha256);
    assert.ok(await hasBlob(files[0]!.hash_sha256), 'still used by copy-4');
    assert.equal((await call(service, 'DELETE', url(bucket.id, 'copy-4'), as('s-many'))).statusCode, 204);
    await gone(files[0]!.hash_sha256);
  });
});
