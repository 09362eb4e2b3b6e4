import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, type StratusClient } from '../../packages/client/src/index.ts';
import { testDialect } from '../helpers/database.ts';
import { runCli, serve, type ServedProcess } from '../helpers/serve.ts';
import { createStore, type FreshStore } from '../helpers/stores.ts';

// `npm run test:pg` moves SQLite → PostgreSQL and PostgreSQL → SQLite; `npm test` (no PostgreSQL)
// runs the same two tests SQLite → SQLite, with the same archive forms and key choices.
const other: 'sqlite' | 'postgres' = testDialect;

const EMAIL = 'mover@example.com';
const PASSWORD = 'a long enough passphrase';
const SCHEDULER_KEY = 'export-scheduler-key';
const SECRET = 's3cret-value';
const DOCKER_MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json';
const sha = (data: string | Uint8Array) => createHash('sha256').update(data).digest('hex');

/** What populate made, for the reads. */
interface World {
  token: string;
  projectId: string;
  lambdaId: string;
  databaseId: string;
  documentId: string;
  loggerId: string;
  bucketId: string;
  layerDigest: string;
  binary: Uint8Array;
}

/** Touches every service through the public port, as a user would. */
async function populate(port: number): Promise<World> {
  const url = `http://127.0.0.1:${port}`;
  const client: StratusClient = createClient({ url, schedulerKey: SCHEDULER_KEY });
  await client.auth.login(EMAIL, PASSWORD);
  const token = client.auth.token!;

  await client.apikeys.keys.create({ name: 'ci' });
  const project = await client.apikeys.projects.create({ name: 'Shop' });
  await client.apikeys.projects.update(project.id, { allowed_origins: ['https://app.example.com'] });

  const lambda = await client.lambda.create({
    name: 'greeter',
    code: 'export default (req, ctx) => new Response(ctx.env.GREETING + " " + ctx.env.TOKEN)',
    env: { GREETING: 'hello' },
    secrets: { TOKEN: SECRET },
  });
  assert.equal((await client.lambda.invoke(lambda.id)).body, `hello ${SECRET}`);

  await client.scheduler.schedulers.create({ display_name: 'Jobs', id: 'jobs' });
  const jobs = client.scheduler.scheduler('jobs');
  await jobs.enqueue({ id: 'later', payload: { n: 1 }, labels: ['kind:a'], delay: '1h' });
  await jobs.enqueue({ id: 'now', payload: { n: 2 } });
  // A webhook the egress policy refuses: one attempt, then the task is dead. Its secret is sealed.
  await client.scheduler.schedulers.create({
    display_name: 'Hooks',
    id: 'hooks',
    target: { url: 'http://127.0.0.1:9/hook', secret: 'whsec-export-test-0123456789' },
    retry: { max_attempts: 1 },
  });
  await client.scheduler.scheduler('hooks').enqueue({ id: 'doomed', payload: { n: 3 } });

  const database = await client.docdb.databases.create('shop');
  const items = client.docdb.database(database.id).collection('items');
  // auto(): the collection's own counter, which must go on from where it was; unixnano(): an
  // integer past 2^53, kept exactly in the document's text.
  await items.create({ id: 'auto()', kind: 'item', at: 'unixnano()' });
  await items.createIndex({ name: 'by-sku', type: 'map', field: 'sku' });
  await items.createIndex({ name: 'by-n', type: 'btree', fields: ['n'] });
  const stored = await items.insert(
    Array.from({ length: 20 }, (_, n) => ({ sku: `s${n}`, n, tags: ['x', `t${n % 3}`] })),
  );
  await items.remove({ n: { $gte: 18 } }); // the serial counter is past the highest row now
  await client.docdb.database(database.id).createApiKey('reader');

  const logger = await client.logs.loggers.create({ name: 'app' });
  await client.logs.logger(logger.id).ingest(['info start', 'error one', 'info done']);

  const bucket = await client.files.buckets.create({ name: 'assets' });
  const files = client.files.bucket(bucket.id);
  await files.upload('notes/a.txt', 'small file, stored inline', { contentType: 'text/plain' });
  // Past the 64 KiB inline limit: a file in the blob directory on SQLite, several chunks on PostgreSQL.
  const binary = new Uint8Array(randomBytes(300_000));
  await files.upload('data.bin', binary, { contentType: 'application/octet-stream' });

  await client.config.objects.create({ id: 'site', entries: { title: 'Shop', nested: { a: [1, 2] } } });
  await client.config.patch({ theme: 'dark', lang: 'en' });

  const push = async (path: string, method: string, body: string, type: string) => {
    const response = await fetch(`${url}/v2/${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': type },
      body,
    });
    assert.equal(response.status, 201, await response.text());
  };
  const layer = 'a layer of the exported image';
  await push(`exp/app/blobs/uploads?digest=sha256:${sha('{}')}`, 'POST', '{}', 'application/octet-stream');
  await push(`exp/app/blobs/uploads?digest=sha256:${sha(layer)}`, 'POST', layer, 'application/octet-stream');
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: DOCKER_MANIFEST,
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: 2, digest: `sha256:${sha('{}')}` },
    layers: [
      {
        mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
        size: layer.length,
        digest: `sha256:${sha(layer)}`,
      },
    ],
  });
  await push('exp/app/manifests/v1', 'PUT', manifest, DOCKER_MANIFEST);
  await client.run.repository('exp/app').start({ reference: 'v1' });

  await client.kv.createCollection('prefs');
  await client.kv.collection('prefs').set('ui/theme', 'dark');
  await client.kv.collection('prefs').set('ui/size', 14);
  await client.kv.collection('prefs').delete('ui/size');

  // The dead letter: the engine delivers within moments.
  const deadline = Date.now() + 15_000;
  while ((await client.scheduler.scheduler('hooks').dead()).dead.length === 0) {
    assert.ok(Date.now() < deadline, 'the webhook task died');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    token,
    projectId: project.id,
    lambdaId: lambda.id,
    databaseId: database.id,
    documentId: String(stored[0]!.id),
    loggerId: logger.id,
    bucketId: bucket.id,
    layerDigest: `sha256:${sha(layer)}`,
    binary,
  };
}

/**
 * What the platform answers, GET by GET over every service (and docdb's index traversal, a POST
 * that only reads). Normalised, each for a reason:
 * - logs stats: the counters are the serving instances' since they started (logs README: Stats);
 *   only `block`, the retained data, is the store's;
 * - run repositories: `actual` is the driver's view of the running engine (recording: `unknown`,
 *   with the time it was read), not stored data.
 */
async function answers(port: number, world: World): Promise<Record<string, unknown>> {
  const url = `http://127.0.0.1:${port}/services`;
  const headers = { authorization: `Bearer ${world.token}`, 'x-api-key': SCHEDULER_KEY };
  const read = async (path: string, init: RequestInit = {}) => {
    const response = await fetch(`${url}/${path}`, { headers, ...init });
    const bytes = new Uint8Array(await response.arrayBuffer());
    const type = response.headers.get('content-type') ?? '';
    const text = new TextDecoder().decode(bytes);
    // docdb's traversals answer one document a line.
    const body =
      type.includes('ndjson') || path.endsWith(':find')
        ? text
            .split('\n')
            .filter(Boolean)
            .map((line) => JSON.parse(line) as unknown)
        : type.includes('json')
          ? JSON.parse(text)
          : `sha256 ${sha(bytes)}`;
    return { status: response.status, body };
  };
  const { databaseId: db, bucketId: bucket, loggerId: logger, lambdaId: lambda } = world;
  const paths = [
    'auth/v0/me',
    'apikeys/v0/apikeys',
    'apikeys/v0/projects',
    `apikeys/v0/projects/${world.projectId}`,
    'lambda/api/v0/lambdas',
    `lambda/api/v0/lambdas/${lambda}`,
    `lambda/api/v0/lambdas/${lambda}/invocations`,
    'scheduler/schedulers',
    'scheduler/schedulers/jobs',
    'scheduler/schedulers/jobs/tasks',
    'scheduler/schedulers/hooks',
    'scheduler/schedulers/hooks/dead',
    'docdb/v1/databases',
    `docdb/v1/databases/${db}`,
    `docdb/v1/databases/${db}/collections`,
    `docdb/v1/databases/${db}/collections/items`,
    `docdb/v1/databases/${db}/collections/items/documents/${world.documentId}`,
    'logs/v1/loggers',
    `logs/v1/loggers/${logger}`,
    `logs/v1/loggers/${logger}/filter`,
    'files/v1/buckets',
    `files/v1/buckets/${bucket}`,
    `files/v1/buckets/${bucket}/list`,
    `files/v1/buckets/${bucket}/files/notes/a.txt`,
    `files/v1/buckets/${bucket}/files/data.bin`,
    'config/v0/configs',
    'config/v0/configs/site',
    'config/v1/config',
    'run/api/console?repository=exp/app',
    'kv/v1/collections',
    'kv/v1/collections/prefs/keys',
    'kv/v1/collections/prefs/keys/ui/theme',
  ];
  const seen: Record<string, unknown> = {};
  for (const path of paths) seen[path] = await read(path);
  const find = (index: string, filter: Record<string, unknown>) =>
    read(`docdb/v1/databases/${db}/collections/items:find`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ filter, index, limit: -1 }),
    });
  seen['items:find by-n'] = await find('by-n', { n: { $gte: 3, $lt: 9 } });
  seen['items:find by-sku'] = await find('by-sku', { sku: 's5' });
  // The registry pushes only; HEAD is how a client asks whether a layer is there.
  const layer = await fetch(`${url}/run/v2/exp/app/blobs/${world.layerDigest}`, { method: 'HEAD', headers });
  seen['run layer'] = { status: layer.status, length: layer.headers.get('content-length') };
  const stats = await read(`logs/v1/loggers/${logger}/stats`);
  seen['logs stats'] = { status: stats.status, block: (stats.body as { block: unknown }).block };
  const repositories = await read('run/api/console/repositories');
  seen['run repositories'] = {
    status: repositories.status,
    repositories: (repositories.body as { repositories: Record<string, unknown>[] }).repositories.map(
      ({ actual: _actual, ...stored }) => stored,
    ),
  };
  return seen;
}

async function invokeGreeter(port: number, world: World): Promise<{ status: number; body: string }> {
  const response = await fetch(`http://127.0.0.1:${port}/services/lambda/api/v0/run/${world.lambdaId}`, {
    headers: { authorization: `Bearer ${world.token}` },
  });
  return { status: response.status, body: await response.text() };
}

describe('stratus export and import move a whole platform between stores', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  const archives = mkdtempSync(join(tmpdir(), 'stratus-archives-'));
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    rmSync(archives, { recursive: true, force: true });
  });
  const store = async (dialect: 'sqlite' | 'postgres') => {
    const made = await createStore(dialect);
    cleanups.push(() => made.cleanup());
    return made;
  };
  const started = async (place: FreshStore, env: Record<string, string | undefined> = {}) => {
    const server = await serve([], { ...place.env, SCHEDULER_API_KEYS: SCHEDULER_KEY, ...env });
    cleanups.push(() => server.stop());
    return server;
  };
  /** Populates a platform on `source`, reads it, exports it while it serves, and stops it. */
  const exported = async (source: FreshStore, to: string, exportArgs: string[], env: Record<string, string> = {}) => {
    const server: ServedProcess = await started(source, { ADMIN_EMAIL: EMAIL, ADMIN_PASSWORD: PASSWORD, ...env });
    const world = await populate(server.publicPort);
    const before = await answers(server.publicPort, world);
    for (const [what, answer] of Object.entries(before))
      assert.equal((answer as { status: number }).status, 200, `${what}: ${JSON.stringify(answer)}`);
    const run = await runCli(['export', '--to', to, ...exportArgs], { ...source.env, ...env });
    assert.equal(run.code, 0, run.output);
    assert.match(run.output, /exported \d+ tables \(\d+ rows\) and 4 blobs/);
    await server.stop();
    return { world, before };
  };

  it(`moves SQLite into ${other === 'postgres' ? 'PostgreSQL' : 'SQLite'} through a tar file with the secrets key`, async () => {
    const source = await store('sqlite');
    const archive = join(archives, 'sqlite.tar');
    const { world, before } = await exported(source, archive, ['--include-secrets-key']);
    assert.ok(existsSync(archive) && !existsSync(`${archive}.partial`));

    // The source is not empty: the command says so and changes nothing.
    const refused = await runCli(['import', '--from', archive], source.env);
    assert.equal(refused.code, 1, refused.output);
    assert.match(refused.output, /^stratus import: the target store is not empty: .*apikeys_keys \(1 row\)/m);

    const target = await store(other);
    const imported = await runCli(['import', '--from', archive], target.env);
    assert.equal(imported.code, 0, imported.output);
    assert.match(imported.output, /imported \d+ tables/);
    assert.match(imported.output, /wrote the archive's secrets key/);
    assert.doesNotMatch(imported.output, /warning/);
    assert.deepEqual(
      readFileSync(join(target.dataDir, 'lambda-secrets.key')),
      readFileSync(join(source.dataDir, 'lambda-secrets.key')),
    );

    const server = await started(target);
    assert.deepEqual(await answers(server.publicPort, world), before);
    // The secret opens with the key that came along.
    assert.deepEqual(await invokeGreeter(server.publicPort, world), { status: 200, body: `hello ${SECRET}` });
    // New rows get numbers past the imported ones (serial counters moved too).
    const client = createClient({ url: `http://127.0.0.1:${server.publicPort}`, token: world.token });
    const added = await client.docdb
      .database(world.databaseId)
      .collection('items')
      .insert([{ sku: 'new', n: 99 }]);
    assert.equal(added.length, 1);
    assert.equal((await client.apikeys.keys.list()).length, 1);
    await client.apikeys.keys.create({ name: 'after the move' });
    assert.deepEqual(
      (await client.apikeys.keys.list()).map((key) => key.name),
      ['ci', 'after the move'],
    );
  });

  it(`moves ${other === 'postgres' ? 'PostgreSQL' : 'SQLite'} into SQLite through a directory, secrets key given by setting`, async () => {
    const key = randomBytes(32).toString('hex');
    const source = await store(other);
    const archive = join(archives, 'directory');
    const { world, before } = await exported(source, archive, [], { LAMBDA_SECRETS_KEY: key });
    assert.ok(existsSync(join(archive, 'manifest.json')));
    assert.ok(!existsSync(join(archive, 'secrets')), 'no key without --include-secrets-key');

    const target = await store('sqlite');
    const imported = await runCli(['import', '--from', archive], target.env);
    assert.equal(imported.code, 0, imported.output);
    // No key here: the import says what will not open, and how to fix it.
    assert.match(imported.output, /warning: values sealed at the source .* will not open here/);

    const server = await started(target, { LAMBDA_SECRETS_KEY: key });
    assert.deepEqual(await answers(server.publicPort, world), before);
    assert.deepEqual(await invokeGreeter(server.publicPort, world), { status: 200, body: `hello ${SECRET}` });
  });
});
