import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { request, type HttpResponse } from '../helpers/http.ts';
import {
  buildBusyboxImage,
  podmanAvailable,
  pushImage,
  removeContainers,
  removeImage,
  runPodman,
  type PodmanAvailability,
} from '../helpers/podman.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';
import { createApiKey } from '../helpers/apikeys.ts';

const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'user-podman-helper' } }) };
const unique = `${process.pid}-${randomBytes(4).toString('hex')}`;
const label = `stratus.test=podman-helper-${unique}`;
const tag = `localhost/stratus-test/podman-helper:${unique}`;
const page = `<h1>served from a container ${unique}</h1>\n`;

/** GETs `path` on a loopback port, retrying while the container's server is still starting. */
async function getWhenUp(port: number, path: string): Promise<HttpResponse> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      return await request(port, { path });
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

describe('test/helpers/podman.ts: real containers built from scratch, run, removed and pushed', () => {
  let podman: PodmanAvailability = { ok: false, reason: 'not checked yet' };
  let env: NodeJS.ProcessEnv = {};

  before(
    async () => {
      podman = await podmanAvailable();
      if (!podman.ok) return;
      env = podman.env;
      await buildBusyboxImage(env, { tag, files: { '/www/index.html': page }, port: 8000 });
    },
    { timeout: 20 * 60_000 }, // a fresh machine installs podman, buildah and skopeo from Debian first
  );

  after(async () => {
    if (!podman.ok) return;
    await removeContainers(env, label);
    await removeImage(env, tag);
  });

  it('runs the image with a published loopback port, serves the file, and leaves nothing behind', async (t) => {
    if (!podman.ok) return t.skip(`podman cannot run containers here: ${podman.reason}`);
    const id = (await runPodman(env, ['run', '-d', '--label', label, '-p', '127.0.0.1::8000', tag])).trim();
    await runPodman(env, ['volume', 'create', '--label', label, `stratus-podman-helper-${unique}`]);

    const published = (await runPodman(env, ['port', id, '8000'])).trim();
    const match = /^127\.0\.0\.1:(\d+)$/.exec(published);
    assert.ok(match, `podman port said ${JSON.stringify(published)}`);
    const response = await getWhenUp(Number(match[1]), '/index.html');
    assert.equal(response.status, 200, response.text);
    assert.equal(response.text, page);

    await removeContainers(env, label);
    assert.equal((await runPodman(env, ['ps', '--all', '--quiet', '--filter', `label=${label}`])).trim(), '');
    assert.equal((await runPodman(env, ['volume', 'ls', '--quiet', '--filter', `label=${label}`])).trim(), '');
    // Nothing left to remove is no error.
    await removeContainers(env, label);

    const scratch = `${tag}-scratch`;
    await buildBusyboxImage(env, { tag: scratch, entrypoint: ['/bin/busybox', 'true'] });
    await runPodman(env, ['image', 'exists', scratch]);
    await removeImage(env, scratch);
    await assert.rejects(runPodman(env, ['image', 'exists', scratch]));
    await removeImage(env, scratch);
  });

  describe('pushImage', () => {
    let database: TestDatabase | undefined;
    let server: ServedProcess | undefined;

    after(async () => {
      await server?.stop();
      await database?.cleanup();
    });

    it('pushes the image to the platform registry as Docker v2s2 and as OCI', { timeout: 120_000 }, async (t) => {
      if (!podman.ok) return t.skip(`podman cannot run containers here: ${podman.reason}`);
      database = await createTestDatabase();
      server = await serve([], { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl });
      const { key, secret } = await createApiKey(server.internalPort, identity, 'podman-helper');

      const registry = `localhost:${server.publicPort}`;
      const repository = 'e2e/podman-helper';
      const basic = { authorization: `Basic ${Buffer.from(`${key}:${secret}`).toString('base64')}` };
      const expected = {
        v2s2: 'application/vnd.docker.distribution.manifest.v2+json',
        oci: 'application/vnd.oci.image.manifest.v1+json',
      } as const;
      for (const format of ['v2s2', 'oci'] as const) {
        const push = { tag, registry, repository, reference: format, username: key, password: secret, format };
        await pushImage(env, push).catch((error: unknown) => {
          throw new Error(
            `${error instanceof Error ? error.message : String(error)}\n${server?.output().slice(-3000)}`,
          );
        });
        const head = await request(server.publicPort, {
          method: 'HEAD',
          path: `/v2/${repository}/manifests/${format}`,
          host: registry,
          headers: basic,
        });
        assert.equal(head.status, 200, `HEAD ${format}`);
        assert.equal(head.headers['content-type'], expected[format]);
        assert.match(String(head.headers['docker-content-digest']), /^sha256:[0-9a-f]{64}$/);
      }

      const listed = await request(server.internalPort, {
        path: `/api/console?repository=${repository}`,
        host: 'run.localhost',
        headers: identity,
      });
      assert.equal(listed.status, 200, listed.text);
      assert.deepEqual([...listed.json<{ references: string[] }>().references].sort(), ['oci', 'v2s2']);
    });
  });
});
