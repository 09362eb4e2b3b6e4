import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { aptInstall } from '../helpers/apt.ts';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/http.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';
import { createApiKey } from '../helpers/apikeys.ts';

const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'user-skopeo' } }) };
const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

function hasSkopeo(): boolean {
  return spawnSync('skopeo', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** A POSIX ustar archive of regular files, written by hand (512-byte header + padded content each). */
function tar(files: Record<string, string>): Buffer {
  const blocks: Buffer[] = [];
  for (const [name, text] of Object.entries(files)) {
    const content = Buffer.from(text);
    const header = Buffer.alloc(512);
    const field = (offset: number, length: number, value: string) => header.write(value, offset, length, 'ascii');
    const octal = (offset: number, length: number, value: number) =>
      field(offset, length, `${value.toString(8).padStart(length - 1, '0')}\0`);
    field(0, 100, name);
    octal(100, 8, 0o644);
    octal(108, 8, 0);
    octal(116, 8, 0);
    octal(124, 12, content.length);
    octal(136, 12, 1_700_000_000);
    field(148, 8, '        ');
    field(156, 1, '0');
    field(257, 6, 'ustar\0');
    field(263, 2, '00');
    let sum = 0;
    for (const byte of header) sum += byte;
    field(148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
    blocks.push(header, content, Buffer.alloc((512 - (content.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

/** An OCI image layout with one image (config + one gzip layer) tagged `tag`. */
function writeOciLayout(dir: string, tag: string): { manifestDigest: string } {
  const blobs = join(dir, 'blobs', 'sha256');
  mkdirSync(blobs, { recursive: true });
  const put = (data: Buffer | string) => {
    const hex = sha256(data);
    writeFileSync(join(blobs, hex), data);
    return { digest: `sha256:${hex}`, size: Buffer.byteLength(data) };
  };
  const layerTar = tar({ 'hello.txt': 'hello from stratus\n' });
  const layer = put(gzipSync(layerTar));
  const config = put(
    JSON.stringify({
      architecture: 'amd64',
      os: 'linux',
      config: {},
      rootfs: { type: 'layers', diff_ids: [`sha256:${sha256(layerTar)}`] },
    }),
  );
  const manifest = put(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', ...layer }],
    }),
  );
  writeFileSync(join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    join(dir, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          ...manifest,
          annotations: { 'org.opencontainers.image.ref.name': tag },
        },
      ],
    }),
  );
  return { manifestDigest: manifest.digest };
}

describe('a real client (skopeo) pushes to the registry through the public port', () => {
  let database: TestDatabase;
  let server: ServedProcess;
  let layoutDir: string;
  let key: string;
  let secret: string;

  before(
    async () => {
      await aptInstall('skopeo', hasSkopeo);
      layoutDir = mkdtempSync(join(tmpdir(), 'stratus-oci-'));
      database = await createTestDatabase();
      server = await serve([], { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl });
      ({ key, secret } = await createApiKey(server.internalPort, identity, 'skopeo'));
    },
    { timeout: 20 * 60_000 },
  );

  after(async () => {
    await server?.stop();
    await database?.cleanup();
    if (layoutDir) rmSync(layoutDir, { recursive: true, force: true });
  });

  it(
    'skopeo copy oci:<dir>:<tag> docker://localhost:<port>/<repo>:<tag> succeeds and the tag is listed',
    { timeout: 120_000 },
    async () => {
      const { manifestDigest } = writeOciLayout(layoutDir, 'v1');
      const repository = 'e2e/hello';
      const copy = spawnSync(
        'skopeo',
        [
          '--insecure-policy',
          'copy',
          '--dest-tls-verify=false',
          '--dest-creds',
          `${key}:${secret}`,
          `oci:${layoutDir}:v1`,
          `docker://localhost:${server.publicPort}/${repository}:v1`,
        ],
        { encoding: 'utf8', timeout: 100_000 },
      );
      assert.equal(copy.status, 0, `skopeo failed:\n${copy.stdout}\n${copy.stderr}\n${server.output().slice(-3000)}`);

      const internal = await request(server.internalPort, {
        path: `/api/console?repository=${repository}`,
        host: 'run.localhost',
        headers: identity,
      });
      assert.equal(internal.status, 200, internal.text);
      assert.deepEqual(internal.json<{ references: string[] }>().references, ['v1']);

      const basic = { authorization: `Basic ${Buffer.from(`${key}:${secret}`).toString('base64')}` };
      const head = await request(server.publicPort, {
        method: 'HEAD',
        path: `/v2/${repository}/manifests/v1`,
        host: `localhost:${server.publicPort}`,
        headers: basic,
      });
      assert.equal(head.status, 200);
      assert.equal(head.headers['docker-content-digest'], manifestDigest);
      assert.equal(head.headers['content-type'], 'application/vnd.oci.image.manifest.v1+json');
    },
  );
});
