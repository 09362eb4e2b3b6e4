import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { InjectOptions } from 'fastify';
import { Readable } from 'node:stream';
import { BlobRefs } from '../../../src/store/blob/refs.ts';
import { createRunService } from '../../../src/services/run/index.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';
import { DOCKER_MANIFEST, assertRegistryError, digestOf, imageManifest, pushBlob, pushImage } from './helpers.ts';

const MAX_BLOB = 64 * 1024;
const alice = asUser('user-alice');
const bob = asUser('user-bob');
const octet = { 'content-type': 'application/octet-stream' };

describe('run registry (push-only /v2/)', () => {
  let service: TestService;
  let clock = Date.now();

  before(async () => {
    service = await startTestService(createRunService({ maxBlobBytes: MAX_BLOB, now: () => clock }));
  });
  after(async () => {
    await service.close();
  });

  const inject = (options: InjectOptions) => service.app.inject(options);

  const startUpload = async (name: string, user = alice) => {
    const response = await service.app.inject({ method: 'POST', url: `/v2/${name}/blobs/uploads/`, headers: user });
    assert.equal(response.statusCode, 202, response.body);
    return String(response.headers.location);
  };

  describe('version check and authentication', () => {
    it('answers 401 with a Basic challenge and the OCI body without identity', async () => {
      const response = await inject({ method: 'GET', url: '/v2/' });
      assert.equal(response.statusCode, 401);
      assert.equal(response.headers['www-authenticate'], 'Basic realm="Stratus Registry"');
      assert.equal(response.headers['docker-distribution-api-version'], 'registry/2.0');
      assert.deepEqual(response.json(), {
        errors: [{ code: 'UNAUTHORIZED', message: 'authentication required', detail: null }],
      });
    });

    it('answers the same challenge on every other /v2/ route, and for an unusable identity', async () => {
      for (const [method, url] of [
        ['POST', '/v2/a/blobs/uploads/'],
        ['PUT', '/v2/a/manifests/v1'],
        ['GET', '/v2/_catalog'],
        ['PATCH', '/v2/a/blobs/uploads/x'],
      ] as const) {
        const response = await inject({
          method,
          url,
          headers: { ...octet },
          payload: method === 'GET' ? undefined : 'x',
        });
        assertRegistryError(response, 401, 'UNAUTHORIZED');
        assert.equal(response.headers['www-authenticate'], 'Basic realm="Stratus Registry"');
      }
      const head = await inject({ method: 'HEAD', url: '/v2/a/blobs/sha256:' + 'a'.repeat(64) });
      assert.equal(head.statusCode, 401);
      assert.equal(head.body, '');
      const garbage = await inject({ method: 'GET', url: '/v2/', headers: { 'x-gateway-authentication': 'not json' } });
      assert.equal(garbage.statusCode, 401);
    });

    it('answers 200 {} with the API version header when an identity is present', async () => {
      const response = await inject({ method: 'GET', url: '/v2/', headers: alice });
      assert.equal(response.statusCode, 200);
      assert.equal(response.headers['docker-distribution-api-version'], 'registry/2.0');
      assert.deepEqual(response.json(), {});
    });
  });

  describe('the complete push of run.md §6.6', () => {
    it('pushes a chunked blob, a config and a manifest, and the tag shows in the console data', async () => {
      const name = 'my-project/my-app';
      const layer = 'hello blob';
      const digest = 'sha256:e997afd18e5f6be004fc193aed2c90291e68ab2c7599a62538c935b7fca6ab0f';
      assert.equal(digestOf(layer), digest);
      const absent = await inject({ method: 'HEAD', url: `/v2/${name}/blobs/${digest}`, headers: alice });
      assert.equal(absent.statusCode, 404);
      assert.equal(absent.body, '');

      const started = await inject({ method: 'POST', url: `/v2/${name}/blobs/uploads/`, headers: alice });
      assert.equal(started.statusCode, 202);
      const location = String(started.headers.location);
      const uuid = String(started.headers['docker-upload-uuid']);
      assert.match(location, new RegExp(`^/v2/${name}/blobs/uploads/${uuid}$`));
      assert.equal(started.headers.range, '0-0');
      assert.equal(started.headers['content-length'], '0');

      const patched = await inject({ method: 'PATCH', url: location, headers: { ...alice, ...octet }, payload: layer });
      assert.equal(patched.statusCode, 202, patched.body);
      assert.equal(patched.headers.range, '0-9');
      assert.equal(patched.headers.location, location);
      assert.equal(patched.headers['docker-upload-uuid'], uuid);

      const finished = await inject({ method: 'PUT', url: `${location}?digest=${digest}`, headers: alice });
      assert.equal(finished.statusCode, 201, finished.body);
      assert.equal(finished.headers.location, `/v2/${name}/blobs/${digest}`);
      assert.equal(finished.headers['docker-content-digest'], digest);

      const present = await inject({ method: 'HEAD', url: `/v2/${name}/blobs/${digest}`, headers: alice });
      assert.equal(present.statusCode, 200);
      assert.equal(present.headers['content-length'], '10');
      assert.equal(present.headers['docker-content-digest'], digest);
      assert.equal(present.headers['content-type'], 'application/octet-stream');

      const config = await pushBlob(service.app, 'user-alice', name, '{}');
      assert.equal(config, 'sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a');
      const manifest = imageManifest(config, 2, digest, 10);
      const put = await inject({
        method: 'PUT',
        url: `/v2/${name}/manifests/v1`,
        headers: { ...alice, 'content-type': DOCKER_MANIFEST },
        payload: manifest,
      });
      assert.equal(put.statusCode, 201, put.body);
      assert.equal(put.headers['docker-content-digest'], digestOf(manifest));
      assert.equal(put.headers.location, `/v2/${name}/manifests/${digestOf(manifest)}`);

      const data = await inject({ method: 'GET', url: `/api/console?repository=${name}`, headers: alice });
      assert.equal(data.statusCode, 200);
      assert.deepEqual(data.json<{ references: string[] }>().references, ['v1']);

      for (const reference of ['v1', digestOf(manifest)]) {
        const head = await inject({ method: 'HEAD', url: `/v2/${name}/manifests/${reference}`, headers: alice });
        assert.equal(head.statusCode, 200);
        assert.equal(head.headers['content-type'], DOCKER_MANIFEST);
        assert.equal(head.headers['content-length'], String(Buffer.byteLength(manifest)));
        assert.equal(head.headers['docker-content-digest'], digestOf(manifest));
      }
      const unknown = await inject({ method: 'HEAD', url: `/v2/${name}/manifests/v2`, headers: alice });
      assert.equal(unknown.statusCode, 404);
      assert.equal(unknown.body, '');

      // The finished blob is held by the repository; the chunk it was made of is released.
      const refs = new BlobRefs(service.store.sql, service.store.blobs);
      assert.equal(await refs.countRefs(digest.slice(7)), 1);
    });
  });

  describe('chunked uploads', () => {
    it('appends chunks with Content-Range, reports status, and verifies the digest over every chunk', async () => {
      const name = 'chunks/ok';
      const location = await startUpload(name);
      const a = Buffer.alloc(1000, 'a');
      const b = Buffer.alloc(500, 'b');
      const c = Buffer.alloc(24, 'c');
      const first = await inject({
        method: 'PATCH',
        url: location,
        headers: { ...alice, ...octet, 'content-range': '0-999' },
        payload: a,
      });
      assert.equal(first.statusCode, 202, first.body);
      assert.equal(first.headers.range, '0-999');
      const second = await inject({
        method: 'PATCH',
        url: location,
        headers: { ...alice, ...octet, 'content-range': '1000-1499' },
        payload: b,
      });
      assert.equal(second.statusCode, 202, second.body);
      assert.equal(second.headers.range, '0-1499');

      const status = await inject({ method: 'GET', url: location, headers: alice });
      assert.equal(status.statusCode, 204);
      assert.equal(status.headers.range, '0-1499');
      assert.equal(status.headers.location, location);
      assert.equal(status.headers['docker-upload-uuid'], location.split('/').pop());

      const whole = Buffer.concat([a, b, c]);
      // The final chunk travels with the PUT.
      const done = await inject({
        method: 'PUT',
        url: `${location}?digest=${digestOf(whole)}`,
        headers: { ...alice, ...octet },
        payload: c,
      });
      assert.equal(done.statusCode, 201, done.body);
      const head = await inject({ method: 'HEAD', url: `/v2/${name}/blobs/${digestOf(whole)}`, headers: alice });
      assert.equal(head.headers['content-length'], '1524');
      const stream = await service.store.blobs.get(digestOf(whole).slice(7));
      assert.ok(stream);
      const chunks: Buffer[] = [];
      for await (const chunk of stream) chunks.push(chunk as Buffer);
      assert.deepEqual(Buffer.concat(chunks), whole);

      // The upload is closed, and its chunks are no longer held.
      const closed = await inject({ method: 'GET', url: location, headers: alice });
      assertRegistryError(closed, 404, 'BLOB_UPLOAD_UNKNOWN');
      const refs = new BlobRefs(service.store.sql, service.store.blobs);
      assert.equal(await refs.countRefs(digestOf(a).slice(7)), 0);
      assert.equal(await refs.countRefs(digestOf(whole).slice(7)), 1);
    });

    it('refuses an out-of-order chunk with 416 BLOB_UPLOAD_INVALID and the current Range', async () => {
      const location = await startUpload('chunks/order');
      await inject({
        method: 'PATCH',
        url: location,
        headers: { ...alice, ...octet, 'content-range': '0-9' },
        payload: Buffer.alloc(10),
      });
      for (const range of ['20-29', '0-9', '5-14']) {
        const response = await inject({
          method: 'PATCH',
          url: location,
          headers: { ...alice, ...octet, 'content-range': range },
          payload: Buffer.alloc(10),
        });
        assertRegistryError(response, 416, 'BLOB_UPLOAD_INVALID');
        assert.equal(response.headers.range, '0-9');
        assert.equal(response.headers.location, location);
      }
      const lying = await inject({
        method: 'PATCH',
        url: location,
        headers: { ...alice, ...octet, 'content-range': '10-19' },
        payload: Buffer.alloc(4),
      });
      assertRegistryError(lying, 416, 'BLOB_UPLOAD_INVALID');
      const status = await inject({ method: 'GET', url: location, headers: alice });
      assert.equal(status.headers.range, '0-9');
    });

    it('discards the upload when the digest does not match (400 DIGEST_INVALID)', async () => {
      const location = await startUpload('chunks/wrong');
      await inject({ method: 'PATCH', url: location, headers: { ...alice, ...octet }, payload: 'some bytes' });
      const wrong = await inject({
        method: 'PUT',
        url: `${location}?digest=${digestOf('other bytes')}`,
        headers: alice,
      });
      assertRegistryError(wrong, 400, 'DIGEST_INVALID');
      const gone = await inject({ method: 'GET', url: location, headers: alice });
      assertRegistryError(gone, 404, 'BLOB_UPLOAD_UNKNOWN');
      const head = await inject({
        method: 'HEAD',
        url: `/v2/chunks/wrong/blobs/${digestOf('other bytes')}`,
        headers: alice,
      });
      assert.equal(head.statusCode, 404);
    });

    it('refuses a missing, malformed or non-sha256 digest on PUT', async () => {
      const location = await startUpload('chunks/digests');
      for (const query of [
        '',
        '?digest=sha256:abc',
        `?digest=sha512:${'a'.repeat(128)}`,
        `?digest=SHA256:${'A'.repeat(64)}`,
      ]) {
        const response = await inject({ method: 'PUT', url: `${location}${query}`, headers: alice });
        const error = assertRegistryError(response, 400, 'DIGEST_INVALID');
        if (query.includes('sha512')) assert.match(error.message, /not supported/);
      }
      // The upload survives a refused digest.
      const status = await inject({ method: 'GET', url: location, headers: alice });
      assert.equal(status.statusCode, 204);
    });

    it('finishes a POST-then-PUT monolithic upload (the whole blob in the PUT)', async () => {
      const location = await startUpload('chunks/mono');
      const data = Buffer.from('all at once');
      const done = await inject({
        method: 'PUT',
        url: `${location}?digest=${digestOf(data)}`,
        headers: { ...alice, ...octet },
        payload: data,
      });
      assert.equal(done.statusCode, 201, done.body);
      const head = await inject({ method: 'HEAD', url: `/v2/chunks/mono/blobs/${digestOf(data)}`, headers: alice });
      assert.equal(head.statusCode, 200);
    });

    it('cancels an upload with DELETE (204); it is unknown afterwards', async () => {
      const location = await startUpload('chunks/cancel');
      await inject({ method: 'PATCH', url: location, headers: { ...alice, ...octet }, payload: 'abc' });
      const cancelled = await inject({ method: 'DELETE', url: location, headers: alice });
      assert.equal(cancelled.statusCode, 204);
      assertRegistryError(
        await inject({ method: 'PATCH', url: location, headers: { ...alice, ...octet }, payload: 'def' }),
        404,
        'BLOB_UPLOAD_UNKNOWN',
      );
      assertRegistryError(
        await inject({ method: 'DELETE', url: location, headers: alice }),
        404,
        'BLOB_UPLOAD_UNKNOWN',
      );
    });

    it('does not know an upload under another name, or an id that is not an upload', async () => {
      const location = await startUpload('chunks/one');
      await startUpload('chunks/two');
      const uuid = location.split('/').pop()!;
      assertRegistryError(
        await inject({ method: 'GET', url: `/v2/chunks/two/blobs/uploads/${uuid}`, headers: alice }),
        404,
        'BLOB_UPLOAD_UNKNOWN',
      );
      assertRegistryError(
        await inject({ method: 'GET', url: '/v2/chunks/one/blobs/uploads/not-a-uuid', headers: alice }),
        404,
        'BLOB_UPLOAD_UNKNOWN',
      );
    });

    it('ignores mount/from and starts a normal upload', async () => {
      await pushBlob(service.app, 'user-alice', 'mount/source', 'shared layer');
      const response = await inject({
        method: 'POST',
        url: `/v2/mount/target/blobs/uploads/?mount=${digestOf('shared layer')}&from=mount/source`,
        headers: alice,
      });
      assert.equal(response.statusCode, 202);
      assert.equal(response.headers.range, '0-0');
      const head = await inject({
        method: 'HEAD',
        url: `/v2/mount/target/blobs/${digestOf('shared layer')}`,
        headers: alice,
      });
      assert.equal(head.statusCode, 404);
    });

    it('expires uploads idle for 24 hours', async () => {
      const location = await startUpload('chunks/expire');
      await inject({ method: 'PATCH', url: location, headers: { ...alice, ...octet }, payload: 'idle bytes' });
      const saved = clock;
      clock += 24 * 60 * 60 * 1000 + 1000;
      try {
        assertRegistryError(await inject({ method: 'GET', url: location, headers: alice }), 404, 'BLOB_UPLOAD_UNKNOWN');
      } finally {
        clock = saved;
      }
    });
  });

  describe('its place in the OpenAPI document', () => {
    it('lists the push endpoints as the registry takes them', async () => {
      const doc = (await inject({ method: 'GET', url: '/openapi.json' })).json<{
        paths: Record<string, Record<string, { operationId: string }>>;
      }>();
      const listed = Object.entries(doc.paths)
        .filter(([path]) => path.startsWith('/v2/'))
        .flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`));
      assert.deepEqual(listed.sort(), [
        'DELETE /v2/{name}/blobs/uploads/{uuid}',
        'GET /v2/{name}/blobs/uploads/{uuid}',
        'HEAD /v2/{name}/blobs/{digest}',
        'HEAD /v2/{name}/manifests/{reference}',
        'PATCH /v2/{name}/blobs/uploads/{uuid}',
        'POST /v2/{name}/blobs/uploads',
        'PUT /v2/{name}/blobs/uploads/{uuid}',
        'PUT /v2/{name}/manifests/{reference}',
      ]);
      // The documented start path, without the specification's trailing slash, is served too.
      const data = 'documented';
      const stored = await inject({
        method: 'POST',
        url: `/v2/doc/app/blobs/uploads?digest=${digestOf(data)}`,
        headers: { ...alice, ...octet },
        payload: data,
      });
      assert.equal(stored.statusCode, 201);
      assert.equal(stored.headers['docker-content-digest'], digestOf(data));
    });
  });

  describe('monolithic uploads and blobs', () => {
    it('stores a blob in one POST ?digest= (201) and rejects a wrong digest', async () => {
      const data = 'monolithic';
      const response = await inject({
        method: 'POST',
        url: `/v2/mono/app/blobs/uploads/?digest=${digestOf(data)}`,
        headers: { ...alice, ...octet },
        payload: data,
      });
      assert.equal(response.statusCode, 201);
      assert.equal(response.headers.location, `/v2/mono/app/blobs/${digestOf(data)}`);
      assert.equal(response.headers['docker-content-digest'], digestOf(data));
      assert.equal(response.headers['content-length'], '0');
      const wrong = await inject({
        method: 'POST',
        url: `/v2/mono/app/blobs/uploads/?digest=${digestOf('x')}`,
        headers: { ...alice, ...octet },
        payload: 'y',
      });
      assertRegistryError(wrong, 400, 'DIGEST_INVALID');
      assert.equal(
        (await inject({ method: 'HEAD', url: `/v2/mono/app/blobs/${digestOf('y')}`, headers: alice })).statusCode,
        404,
      );
    });

    it('a blob exists only in the repositories it was uploaded to', async () => {
      await pushBlob(service.app, 'user-alice', 'link/one', 'linked');
      assert.equal(
        (await inject({ method: 'HEAD', url: `/v2/link/one/blobs/${digestOf('linked')}`, headers: alice })).statusCode,
        200,
      );
      assert.equal(
        (await inject({ method: 'HEAD', url: `/v2/link/two/blobs/${digestOf('linked')}`, headers: alice })).statusCode,
        404,
      );
    });

    it('refuses blobs over the size limit with 413 SIZE_INVALID (declared, streamed, and across chunks)', async () => {
      const big = Buffer.alloc(MAX_BLOB + 1, 1);
      const declared = await inject({
        method: 'POST',
        url: `/v2/size/app/blobs/uploads/?digest=${digestOf(big)}`,
        headers: { ...alice, ...octet },
        payload: big,
      });
      assertRegistryError(declared, 413, 'SIZE_INVALID');
      // A chunked body (no Content-Length) is cut while streaming.
      const streamed = await inject({
        method: 'POST',
        url: `/v2/size/app/blobs/uploads/?digest=${digestOf(big)}`,
        headers: { ...alice, ...octet },
        payload: Readable.from([big.subarray(0, 40_000), big.subarray(40_000)]),
      });
      assertRegistryError(streamed, 413, 'SIZE_INVALID');
      const location = await startUpload('size/app');
      const first = await inject({
        method: 'PATCH',
        url: location,
        headers: { ...alice, ...octet },
        payload: big.subarray(0, MAX_BLOB - 10),
      });
      assert.equal(first.statusCode, 202);
      const over = await inject({
        method: 'PATCH',
        url: location,
        headers: { ...alice, ...octet },
        payload: big.subarray(0, 11),
      });
      assertRegistryError(over, 413, 'SIZE_INVALID');
      const status = await inject({ method: 'GET', url: location, headers: alice });
      assert.equal(status.headers.range, `0-${MAX_BLOB - 11}`);
    });
  });

  describe('names and ownership', () => {
    it('refuses bad repository names with 400 NAME_INVALID', async () => {
      for (const name of ['Upper/case', 'a//b', 'trailing-', '-lead', 'a..b', `${'a'.repeat(256)}`]) {
        const response = await inject({ method: 'POST', url: `/v2/${name}/blobs/uploads/`, headers: alice });
        assertRegistryError(response, 400, 'NAME_INVALID');
      }
      for (const name of ['a', 'a/b/c', 'a.b_c__d---e', 'x0/y1']) {
        const response = await inject({ method: 'POST', url: `/v2/${name}/blobs/uploads/`, headers: alice });
        assert.equal(response.statusCode, 202, `${name}: ${response.body}`);
      }
    });

    it("answers 403 DENIED on another user's repository, and the first pusher owns it", async () => {
      await pushImage(service.app, 'user-alice', 'owned/app', 'v1');
      const denied = [
        await inject({ method: 'POST', url: '/v2/owned/app/blobs/uploads/', headers: bob }),
        await inject({
          method: 'POST',
          url: `/v2/owned/app/blobs/uploads/?digest=${digestOf('b')}`,
          headers: { ...bob, ...octet },
          payload: 'b',
        }),
        await inject({
          method: 'PUT',
          url: '/v2/owned/app/manifests/v2',
          headers: { ...bob, 'content-type': DOCKER_MANIFEST },
          payload: '{}',
        }),
      ];
      for (const response of denied) assertRegistryError(response, 403, 'DENIED');
      const head = await inject({ method: 'HEAD', url: `/v2/owned/app/blobs/${digestOf('{}')}`, headers: bob });
      assert.equal(head.statusCode, 403);
      const location = await startUpload('owned/up');
      assertRegistryError(
        await inject({ method: 'PATCH', url: location, headers: { ...bob, ...octet }, payload: 'x' }),
        403,
        'DENIED',
      );
      assertRegistryError(
        await inject({ method: 'PUT', url: `${location}?digest=${digestOf('x')}`, headers: bob }),
        403,
        'DENIED',
      );
      // Bob's console cannot see it either.
      assert.equal(
        (await inject({ method: 'GET', url: '/api/console?repository=owned/app', headers: bob })).statusCode,
        404,
      );
    });

    it('creates a repository for exactly one of two users pushing at once', async () => {
      const [a, b] = await Promise.all([
        inject({ method: 'POST', url: '/v2/race/app/blobs/uploads/', headers: alice }),
        inject({ method: 'POST', url: '/v2/race/app/blobs/uploads/', headers: bob }),
      ]);
      assert.deepEqual([a.statusCode, b.statusCode].sort(), [202, 403]);
    });
  });

  describe('manifests', () => {
    const name = 'manifests/app';
    let config: string;
    let layer: string;
    before(async () => {
      config = await pushBlob(service.app, 'user-alice', name, '{"architecture":"amd64"}');
      layer = await pushBlob(service.app, 'user-alice', name, 'layer bytes');
    });
    const put = (reference: string, body: string, contentType: string | undefined = DOCKER_MANIFEST) =>
      inject({
        method: 'PUT',
        url: `/v2/${name}/manifests/${reference}`,
        headers: { ...alice, ...(contentType ? { 'content-type': contentType } : {}) },
        payload: body,
      });
    const references = async () =>
      (await inject({ method: 'GET', url: `/api/console?repository=${name}`, headers: alice })).json<{
        references: string[];
      }>().references;

    it('refuses a manifest naming a blob not in the repository (MANIFEST_BLOB_UNKNOWN, detail names it)', async () => {
      const missing = digestOf('not uploaded');
      const error = assertRegistryError(
        await put('v1', imageManifest(config, 1, missing, 1)),
        400,
        'MANIFEST_BLOB_UNKNOWN',
      );
      assert.deepEqual(error.detail, { digest: missing });
    });

    it('refuses invalid manifests with MANIFEST_INVALID', async () => {
      const good = imageManifest(config, 1, layer, 1);
      assertRegistryError(await put('v1', 'not json'), 400, 'MANIFEST_INVALID');
      assertRegistryError(await put('v1', good, 'application/json'), 400, 'MANIFEST_INVALID');
      assertRegistryError(await put('v1', good, 'application/vnd.oci.image.manifest.v1+json'), 400, 'MANIFEST_INVALID');
      assertRegistryError(
        await put('v1', JSON.stringify({ schemaVersion: 1, mediaType: DOCKER_MANIFEST })),
        400,
        'MANIFEST_INVALID',
      );
      assertRegistryError(
        await put('v1', JSON.stringify({ schemaVersion: 2, mediaType: DOCKER_MANIFEST, config: { digest: config } })),
        400,
        'MANIFEST_INVALID',
      );
      assertRegistryError(await put('bad tag!', good), 400, 'MANIFEST_INVALID');
      assert.deepEqual(await references(), []);
    });

    it('accepts a push by digest (no reference added) and refuses a digest that differs from the body', async () => {
      const manifest = imageManifest(config, 1, layer, 1);
      const ok = await put(digestOf(manifest), manifest);
      assert.equal(ok.statusCode, 201, ok.body);
      assert.deepEqual(await references(), []);
      assertRegistryError(await put(digestOf('other'), manifest), 400, 'DIGEST_INVALID');
    });

    it('keeps first-push order of tags; a re-pushed tag moves and keeps its place', async () => {
      const m1 = imageManifest(config, 1, layer, 1);
      const m2 = imageManifest(config, 2, layer, 2, 'application/vnd.oci.image.manifest.v1+json');
      assert.equal((await put('latest', m1)).statusCode, 201);
      assert.equal((await put('v1', m1)).statusCode, 201);
      const moved = await put('latest', m2, 'application/vnd.oci.image.manifest.v1+json');
      assert.equal(moved.statusCode, 201, moved.body);
      assert.deepEqual(await references(), ['latest', 'v1']);
      const head = await inject({ method: 'HEAD', url: `/v2/${name}/manifests/latest`, headers: alice });
      assert.equal(head.headers['docker-content-digest'], digestOf(m2));
      assert.equal(head.headers['content-type'], 'application/vnd.oci.image.manifest.v1+json');
    });

    it('accepts an index whose child manifests are in the repository, refuses one with an unknown child', async () => {
      const child = imageManifest(config, 1, layer, 1);
      await put(digestOf(child), child);
      const index = (digest: string, mediaType: string) =>
        JSON.stringify({
          schemaVersion: 2,
          mediaType,
          manifests: [
            { mediaType: DOCKER_MANIFEST, size: 10, digest, platform: { architecture: 'amd64', os: 'linux' } },
          ],
        });
      const oci = index(digestOf(child), 'application/vnd.oci.image.index.v1+json');
      assert.equal((await put('multi', oci, 'application/vnd.oci.image.index.v1+json')).statusCode, 201);
      const list = index(digestOf(child), 'application/vnd.docker.distribution.manifest.list.v2+json');
      assert.equal(
        (await put('list', list, 'application/vnd.docker.distribution.manifest.list.v2+json')).statusCode,
        201,
      );
      const unknown = digestOf('no such manifest');
      const error = assertRegistryError(
        await put(
          'broken',
          index(unknown, 'application/vnd.oci.image.index.v1+json'),
          'application/vnd.oci.image.index.v1+json',
        ),
        400,
        'MANIFEST_BLOB_UNKNOWN',
      );
      assert.deepEqual(error.detail, { digest: unknown });
    });

    it('refuses a manifest over 4 MiB with 413 SIZE_INVALID', async () => {
      const huge = JSON.stringify({ schemaVersion: 2, mediaType: DOCKER_MANIFEST, pad: 'x'.repeat(4 * 1024 * 1024) });
      assertRegistryError(await put('huge', huge), 413, 'SIZE_INVALID');
    });
  });

  describe('what is not served', () => {
    it('answers 405 UNSUPPORTED to pulls, deletes, tag listing and the catalog', async () => {
      const digest = await pushBlob(service.app, 'user-alice', 'pull/app', 'pull me');
      for (const [method, url] of [
        ['GET', `/v2/pull/app/blobs/${digest}`],
        ['GET', '/v2/pull/app/manifests/latest'],
        ['DELETE', `/v2/pull/app/blobs/${digest}`],
        ['DELETE', '/v2/pull/app/manifests/latest'],
        ['GET', '/v2/pull/app/tags/list'],
        ['GET', '/v2/_catalog'],
      ] as const) {
        assertRegistryError(await inject({ method, url, headers: alice }), 405, 'UNSUPPORTED');
      }
    });
  });
});
