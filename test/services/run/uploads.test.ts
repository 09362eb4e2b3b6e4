import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import type { InjectOptions } from 'fastify';
import { BlobRefs } from '../../../src/store/blob/refs.ts';
import { createRunService } from '../../../src/services/run/index.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';
import { assertRegistryError, digestOf } from './helpers.ts';

const alice = asUser('user-alice');
const octet = { 'content-type': 'application/octet-stream' };

// Chunked uploads finish either by closing the blob this instance wrote while the chunks arrived
// (the follower) or by re-reading the stored chunks (another instance, a restart): both must
// store exactly the bytes sent and verify the digest.
for (const followChunks of [true, false]) {
  describe(`chunked uploads finished ${followChunks ? 'by the follower' : 'by re-reading the chunks'}`, () => {
    let service: TestService;
    before(async () => {
      service = await startTestService(createRunService({ followChunks, maxBlobBytes: 8 * 1024 * 1024 }));
    });
    after(async () => {
      await service.close();
    });
    const inject = (options: InjectOptions) => service.app.inject(options);

    const upload = async (name: string, chunks: Buffer[]) => {
      const started = await inject({ method: 'POST', url: `/v2/${name}/blobs/uploads/`, headers: alice });
      const location = String(started.headers.location);
      for (const chunk of chunks) {
        const patched = await inject({
          method: 'PATCH',
          url: location,
          headers: { ...alice, ...octet },
          payload: chunk,
        });
        assert.equal(patched.statusCode, 202, patched.body);
      }
      return location;
    };
    const content = async (digest: string) => {
      const stream = await service.store.blobs.get(digest.slice(7));
      assert.ok(stream, 'blob stored');
      const parts: Buffer[] = [];
      for await (const part of stream) parts.push(part as Buffer);
      return Buffer.concat(parts);
    };

    it('stores the concatenation of the chunks and releases them', async () => {
      const chunks = [randomBytes(300_000), randomBytes(1_500_000), randomBytes(7)];
      const whole = Buffer.concat(chunks);
      const location = await upload('follow/plain', chunks);
      const done = await inject({ method: 'PUT', url: `${location}?digest=${digestOf(whole)}`, headers: alice });
      assert.equal(done.statusCode, 201, done.body);
      assert.deepEqual(await content(digestOf(whole)), whole);
      const refs = new BlobRefs(service.store.sql, service.store.blobs);
      for (const chunk of chunks) assert.equal(await refs.countRefs(digestOf(chunk).slice(7)), 0);
      assert.equal(await refs.countRefs(digestOf(whole).slice(7)), 1);
    });

    // The body arrives as many small pieces (as from a socket), regrouped into one reused buffer
    // before the store: every byte must land in order, whether the blob ends up one chunk or two.
    it('stores a chunk that arrives in many small pieces byte for byte', async () => {
      const whole = randomBytes(2_500_000);
      const pieces = Array.from({ length: Math.ceil(whole.length / 40_000) }, (_, i) =>
        whole.subarray(i * 40_000, (i + 1) * 40_000),
      );
      const location = await upload('follow/pieces', []);
      const patched = await inject({
        method: 'PATCH',
        url: location,
        headers: { ...alice, ...octet, 'content-length': String(whole.length) },
        payload: Readable.from(pieces),
      });
      assert.equal(patched.statusCode, 202, patched.body);
      const done = await inject({ method: 'PUT', url: `${location}?digest=${digestOf(whole)}`, headers: alice });
      assert.equal(done.statusCode, 201, done.body);
      assert.deepEqual(await content(digestOf(whole)), whole);
      const monolithic = randomBytes(1_300_000);
      const posted = await inject({
        method: 'POST',
        url: `/v2/follow/pieces/blobs/uploads/?digest=${digestOf(monolithic)}`,
        headers: { ...alice, ...octet, 'content-length': String(monolithic.length) },
        // A small piece, one of exactly the regrouping size, then the rest.
        payload: Readable.from([
          monolithic.subarray(0, 65_536),
          monolithic.subarray(65_536, 65_536 + 1_048_576),
          monolithic.subarray(65_536 + 1_048_576),
        ]),
      });
      assert.equal(posted.statusCode, 201, posted.body);
      assert.deepEqual(await content(digestOf(monolithic)), monolithic);
    });

    it('appends the final chunk sent with the PUT', async () => {
      const chunks = [randomBytes(200_000), randomBytes(200_000)];
      const last = randomBytes(50_000);
      const whole = Buffer.concat([...chunks, last]);
      const location = await upload('follow/final', chunks);
      const done = await inject({
        method: 'PUT',
        url: `${location}?digest=${digestOf(whole)}`,
        headers: { ...alice, ...octet },
        payload: last,
      });
      assert.equal(done.statusCode, 201, done.body);
      assert.deepEqual(await content(digestOf(whole)), whole);
    });

    it('answers DIGEST_INVALID when the chunks do not hash to the digest, links nothing and discards the upload', async () => {
      const chunks = [randomBytes(100_000), randomBytes(100_000)];
      const location = await upload('follow/wrong', chunks);
      const wrong = digestOf('something else');
      assertRegistryError(
        await inject({ method: 'PUT', url: `${location}?digest=${wrong}`, headers: alice }),
        400,
        'DIGEST_INVALID',
      );
      assert.equal(
        (
          await inject({
            method: 'HEAD',
            url: `/v2/follow/wrong/blobs/${digestOf(Buffer.concat(chunks))}`,
            headers: alice,
          })
        ).statusCode,
        404,
      );
      assertRegistryError(await inject({ method: 'GET', url: location, headers: alice }), 404, 'BLOB_UPLOAD_UNKNOWN');
    });

    it('refuses a final chunk that takes the blob over the limit (413 SIZE_INVALID)', async () => {
      const location = await upload('follow/limit', [randomBytes(4 * 1024 * 1024), randomBytes(3 * 1024 * 1024)]);
      const last = randomBytes(2 * 1024 * 1024);
      assertRegistryError(
        await inject({
          method: 'PUT',
          url: `${location}?digest=${digestOf(last)}`,
          headers: { ...alice, ...octet },
          payload: last,
        }),
        413,
        'SIZE_INVALID',
      );
    });

    it('finishes an upload after it was cancelled and restarted', async () => {
      const first = await upload('follow/restart', [randomBytes(1000), randomBytes(1000)]);
      assert.equal((await inject({ method: 'DELETE', url: first, headers: alice })).statusCode, 204);
      const chunks = [randomBytes(1000), randomBytes(1000)];
      const second = await upload('follow/restart', chunks);
      const whole = Buffer.concat(chunks);
      assert.equal(
        (await inject({ method: 'PUT', url: `${second}?digest=${digestOf(whole)}`, headers: alice })).statusCode,
        201,
      );
      assert.deepEqual(await content(digestOf(whole)), whole);
    });
  });
}

describe('abandoned uploads', () => {
  let service: TestService;
  let clock = Date.now();
  before(async () => {
    service = await startTestService(createRunService({ now: () => clock, uploadSweepIntervalMs: 20 }));
  });
  after(async () => {
    await service.close();
  });

  it('are removed 24 h after their last chunk, and their chunks released', async () => {
    const started = await service.app.inject({
      method: 'POST',
      url: '/v2/abandoned/app/blobs/uploads/',
      headers: alice,
    });
    const location = String(started.headers.location);
    const chunk = randomBytes(1000);
    assert.equal(
      (await service.app.inject({ method: 'PATCH', url: location, headers: { ...alice, ...octet }, payload: chunk }))
        .statusCode,
      202,
    );
    const refs = new BlobRefs(service.store.sql, service.store.blobs);
    assert.equal(await refs.countRefs(digestOf(chunk).slice(7)), 1);

    clock += 23 * 60 * 60 * 1000;
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(
      (await service.app.inject({ method: 'GET', url: location, headers: alice })).statusCode,
      204,
      'still alive before 24 h',
    );

    clock += 60 * 60 * 1000 + 1000;
    const deadline = Date.now() + 5000;
    while ((await refs.countRefs(digestOf(chunk).slice(7))) !== 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(await refs.countRefs(digestOf(chunk).slice(7)), 0);
    // Gone for good, not only hidden by the clock.
    clock -= 2 * 60 * 60 * 1000;
    assertRegistryError(
      await service.app.inject({ method: 'GET', url: location, headers: alice }),
      404,
      'BLOB_UPLOAD_UNKNOWN',
    );
  });
});
