import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createClient, StratusError, type StratusClient } from '../../packages/client/src/index.ts';
import { VERSION } from '../../src/core/version.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const EMAIL = 'client-sdk@example.com';
const PASSWORD = 'correct horse battery staple';
const DOCKER_MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json';

/** @stratus/client against the whole platform on loopback, through the one base URL only. */
describe('client SDK against a running platform', () => {
  let t: TestPlatform;
  let url: string;
  let client: StratusClient;

  before(async () => {
    t = await startTestPlatform({ adminEmail: EMAIL, adminPassword: PASSWORD, signup: 'open' });
    url = `http://127.0.0.1:${t.platform.publicPort}`;
    client = createClient({ url, schedulerKey: 'test-scheduler-key' });
    const login = await client.auth.login(EMAIL, PASSWORD);
    assert.equal(login.user.email, EMAIL);
  });
  after(async () => {
    await t?.close();
  });

  it('signs in, reads the user, trades the session for a new token and signs out', async () => {
    const me = await client.auth.me();
    assert.equal(me.email, EMAIL);

    const other = createClient({ url: `${url}/` });
    await other.auth.login(EMAIL, PASSWORD);
    const first = other.auth.token;
    const refreshed = await other.auth.refresh();
    assert.notEqual(refreshed.token, first);
    assert.equal(other.auth.token, refreshed.token);
    assert.equal((await other.auth.me()).email, EMAIL);

    await other.auth.logout();
    assert.equal(other.auth.token, undefined);
    // The logged-out session no longer works anywhere.
    const stale = createClient({ url, token: refreshed.token });
    await assert.rejects(stale.auth.me(), (error: unknown) => {
      assert.ok(error instanceof StratusError);
      assert.equal(error.status, 401);
      assert.equal(error.code, 'unauthorized');
      return true;
    });
  });

  it('signs up a new account, and refuses a sign-in code nobody issued', async () => {
    const newcomer = createClient({ url });
    const joined = await newcomer.auth.signup('newcomer@example.com', 'a long enough passphrase', 'newcomer');
    assert.equal(joined.user.email, 'newcomer@example.com');
    assert.equal(newcomer.auth.token, joined.token);
    assert.equal((await newcomer.auth.me()).email, 'newcomer@example.com');
    await assert.rejects(createClient({ url }).auth.exchangeCode('no-such-code', 'v'.repeat(43)), {
      status: 401,
      code: 'unauthorized',
    });
  });

  it("revokes a database's own key", async () => {
    const database = client.docdb.database((await client.docdb.databases.create('keys')).id);
    const key = await database.createApiKey('reader');
    const asKey = createClient({ url, apiKey: key.key, secret: key.secret });
    assert.equal((await asKey.docdb.database(database.id).get()).id, database.id);
    await database.deleteApiKey(key.key);
    await assert.rejects(asKey.docdb.database(database.id).get(), { status: 401 });
  });

  it('starts, configures, stops and rolls back a pushed repository', async () => {
    // Images arrive with container tools; here three registry calls with the session as bearer.
    const push = async (path: string, method: string, body: string, type: string) => {
      const response = await fetch(`${url}/v2/${path}`, {
        method,
        headers: { authorization: `Bearer ${client.auth.token}`, 'content-type': type },
        body,
      });
      assert.equal(response.status, 201, await response.text());
      return String(response.headers.get('docker-content-digest'));
    };
    const sha = (text: string) => `sha256:${createHash('sha256').update(text).digest('hex')}`;
    const blob = (text: string) =>
      push(`sdk/app/blobs/uploads?digest=${sha(text)}`, 'POST', text, 'application/octet-stream');
    const manifest = (tag: string, layer: string) =>
      push(
        `sdk/app/manifests/${tag}`,
        'PUT',
        JSON.stringify({
          schemaVersion: 2,
          mediaType: DOCKER_MANIFEST,
          config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: 2, digest: sha('{}') },
          layers: [
            { mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: layer.length, digest: sha(layer) },
          ],
        }),
        DOCKER_MANIFEST,
      );
    await blob('{}');
    await blob('layer one');
    await blob('layer two');
    const v1 = await manifest('v1', 'layer one');
    await manifest('v2', 'layer two');

    const repository = client.run.repository('sdk/app');
    assert.deepEqual((await repository.get()).references, ['v1', 'v2']);
    const started = await repository.start({ reference: 'v2' });
    assert.equal(started.desired.state, 'running');
    assert.equal(started.desired.reference, 'v2');
    const configured = await repository.setEnv([{ key: 'MODE', desired_value: 'sdk' }]);
    assert.deepEqual(configured.env, [{ key: 'MODE', desired_value: 'sdk' }]);
    assert.deepEqual((await repository.setVolumes([{ name: 'data', target: '/data' }])).volumes, [
      { name: 'data', target: '/data', mode: 'rw' },
    ]);
    const rolledBack = await repository.rollBack({ digest: v1 });
    assert.equal(rolledBack.desired.digest, v1);
    const stopped = await repository.stop();
    assert.equal(stopped.desired.state, 'stopped');
    assert.deepEqual(
      stopped.history.map((entry) => entry.action),
      ['start', 'rollback', 'stop'],
    );
    await assert.rejects(client.run.repository('sdk/none').get(), { status: 404, code: 'not_found' });
    await assert.rejects(repository.setEnv([{ key: '1bad', desired_value: 'x' }]), {
      status: 400,
      code: 'validation_error',
    });

    // The list: the caller's repositories only, with the driver (the test platform records, runs nothing).
    const listed = await client.run.repositories();
    assert.equal(listed.driver, 'recording');
    const entry = listed.repositories.find((r) => r.repository === 'sdk/app');
    assert.ok(entry, 'the pushed repository is listed');
    assert.deepEqual(entry.references, ['v1', 'v2']);
    assert.equal(entry.desired.state, 'stopped');
    assert.equal(entry.actual?.state, 'unknown');
    assert.match(entry.host ?? '', /^sdk-app\.run\./);
    const stranger = createClient({ url });
    await stranger.auth.signup('run-stranger@example.com', 'a long enough passphrase', 'run-stranger');
    assert.deepEqual((await stranger.run.repositories()).repositories, []);
    await assert.rejects(stranger.run.repository('sdk/app').get(), { status: 404, code: 'not_found' });

    // The logger the container's output goes to: one of the owner's, or none.
    const logger = await client.logs.loggers.create({ name: 'sdk-app-output' });
    assert.equal((await repository.setLogger(logger.id)).logger_id, logger.id);
    const theirs = await stranger.logs.loggers.create({ name: 'not yours' });
    await assert.rejects(repository.setLogger(theirs.id), { status: 400, code: 'validation_error' });
    assert.equal((await repository.get()).logger_id, logger.id, 'a refused logger changes nothing');
    assert.equal((await repository.setLogger(null)).logger_id, null);
  });

  it("reads the gateway's version, traffic, health and instances", async () => {
    assert.equal(await client.gateway.version(), VERSION);
    const stats = await client.gateway.stats();
    assert.ok((stats.find((row) => row.host === '*')?.served_requests ?? 0) > 0);
    const status = await client.gateway.status();
    assert.ok(
      status.some((row) => row.id === 'docdb' && row.status === 200),
      JSON.stringify(status),
    );
    const instances = await client.gateway.instances();
    assert.equal(instances.filter((instance) => instance.answering).length, 1);
    await assert.rejects(createClient({ url }).gateway.instances(), { status: 401 });
    const hosts = await client.gateway.virtualHosts();
    assert.ok(hosts.includes('kv.localhost') && hosts.includes('gateway.localhost'), JSON.stringify(hosts));
  });

  it('creates API keys and projects, and a key works as the client credential', async () => {
    const key = await client.apikeys.keys.create({ name: 'sdk' });
    assert.ok(key.secret.length > 0);
    assert.ok((await client.apikeys.keys.list()).some((k) => k.key === key.key));

    const project = await client.apikeys.projects.create({ name: 'Shop' });
    const changed = await client.apikeys.projects.update(project.id, { allowed_origins: ['https://app.example.com'] });
    assert.deepEqual(changed.allowed_origins, ['https://app.example.com']);
    assert.equal((await client.apikeys.projects.get(project.id)).name, 'Shop');
    assert.ok((await client.apikeys.projects.list()).some((p) => p.id === project.id));

    const keyed = createClient({ url, apiKey: key.key, secret: key.secret });
    assert.equal((await keyed.kv.createCollection('via-key')).ok, true);

    await client.apikeys.keys.revoke(key.key);
    await assert.rejects(keyed.kv.listCollections(), { name: 'StratusError', status: 401 });
    await client.apikeys.projects.delete(project.id);
    await assert.rejects(client.apikeys.projects.get(project.id), { status: 404, code: 'not_found' });
  });

  it('creates a database, inserts documents from an array and a stream, and streams them back', async () => {
    const database = await client.docdb.databases.create('sdk');
    assert.ok((await client.docdb.databases.list()).some((d) => d.id === database.id));
    const items = client.docdb.database(database.id).collection<{ id: string; sku: string; n: number }>('items');

    const stored = await items.insert([
      { sku: 'a', n: 1 },
      { sku: 'b', n: 2 },
    ]);
    assert.deepEqual(
      stored.map((d) => d.sku),
      ['a', 'b'],
    );
    assert.ok(stored.every((d) => typeof d.id === 'string' && d.id.length > 0));

    async function* more() {
      for (let n = 3; n <= 50; n++) yield { sku: `s${n}`, n };
    }
    assert.equal((await items.insert(more())).length, 48);

    const found: number[] = [];
    for await (const document of items.find({ n: { $gt: 45 } })) found.push(document.n);
    assert.deepEqual(found, [46, 47, 48, 49, 50]);

    // Leaving the loop early ends the stream; the client stays usable.
    let seen = 0;
    for await (const _document of items.find()) if (++seen === 3) break;
    assert.equal(seen, 3);
    assert.equal((await items.findOne({ sku: 'b' }))?.n, 2);
    assert.equal((await items.getDocument(stored[0]!.id)).sku, 'a');

    const patched = await items.patch({ sku: 'a' }, { n: 100 });
    assert.deepEqual(
      patched.map((d) => d.n),
      [100],
    );
    assert.equal((await items.remove({ n: { $lt: 10 } })).length, 8);
    assert.equal((await items.get()).total, 42);

    await client.docdb.databases.delete(database.id);
    await assert.rejects(client.docdb.database(database.id).get(), { status: 404, code: 'not_found' });
  });

  it('answers a bad filter as a StratusError 400 carrying the request id', async () => {
    const database = await client.docdb.databases.create('bad');
    const items = client.docdb.database(database.id).collection('items');
    await items.insert([{ a: 1 }]);
    await assert.rejects(
      async () => {
        for await (const _document of items.find({ a: { $nope: 1 } })) assert.fail('no document expected');
      },
      (error: unknown) => {
        assert.ok(error instanceof StratusError);
        assert.equal(error.status, 400);
        assert.equal(error.code, 'invalid_filter');
        assert.ok(error.requestId, 'X-Request-Id is kept');
        return true;
      },
    );
  });

  it('uploads with progress, lists, downloads and deletes a file whose path needs encoding', async () => {
    const bucket = await client.files.buckets.create({ name: 'sdk' });
    const files = client.files.bucket(bucket.id);
    const content = new Uint8Array(300_000).map((_, i) => i % 251);
    const progress: number[] = [];
    const stored = await files.upload('dir one/ré sumé.bin', content, {
      contentType: 'application/octet-stream',
      onProgress: ({ loaded, total }) => {
        assert.equal(total, content.byteLength);
        progress.push(loaded);
      },
    });
    assert.equal(stored.name, 'dir one/ré sumé.bin');
    assert.equal(progress.at(-1), content.byteLength);
    assert.ok(progress.length > 2, `progress reported as the body went out: ${progress.join(',')}`);
    assert.deepEqual(
      progress,
      [...progress].sort((a, b) => a - b),
    );

    await files.upload('dir one/note.txt', 'hello', { contentType: 'text/plain' });
    assert.deepEqual(
      (await files.list('dir one/')).map((f) => f.name),
      ['dir one/ré sumé.bin', 'dir one/note.txt'],
    );
    const downloaded = new Uint8Array(await (await files.download('dir one/ré sumé.bin')).arrayBuffer());
    assert.deepEqual(downloaded, content);
    assert.equal(await (await files.download('dir one/note.txt')).text(), 'hello');

    await files.delete('dir one/note.txt');
    await assert.rejects(files.download('dir one/note.txt'), { status: 404, code: 'not_found' });
  });

  it('ingests log lines and follows new ones until the signal aborts', async () => {
    const logger = await client.logs.loggers.create({ name: 'sdk' });
    const handle = client.logs.logger(logger.id);
    assert.equal((await handle.ingest(['info start', 'error one'])).n, 'info start\nerror one\n'.length);
    const caughtUp: string[] = [];
    for await (const line of handle.lines({ regex: 'error' })) caughtUp.push(line);
    assert.deepEqual(caughtUp, ['error one']);

    const controller = new AbortController();
    const followed: string[] = [];
    const following = (async () => {
      for await (const line of handle.follow({ regex: '^error', signal: controller.signal })) {
        followed.push(line);
        if (followed.length === 1) await handle.ingest(['info skip', 'error two']);
        if (followed.length === 2) controller.abort();
      }
    })();
    await assert.rejects(following, { name: 'AbortError' });
    assert.deepEqual(followed, ['error one', 'error two']);
  });

  it('enqueues, reserves, extends and acknowledges a task, and streams the scheduler', async () => {
    const scheduler = await client.scheduler.schedulers.create({ display_name: 'SDK jobs', id: 'sdk-jobs' });
    assert.equal(scheduler.id, 'sdk-jobs');
    const handle = client.scheduler.scheduler('sdk-jobs');
    const enqueued = await handle.enqueue({ id: 'job-1', payload: { to: 'a@example.com' } });
    assert.equal(enqueued.id, 'job-1');

    const controller = new AbortController();
    const stream = handle.stream({ signal: controller.signal });
    const first = await stream.next();
    assert.equal(first.done, false);
    assert.ok(first.value, 'a snapshot arrives first');

    const reservation = await handle.reserve({ worktime: '10s' });
    assert.ok(reservation);
    assert.equal(reservation.id, 'job-1');
    assert.deepEqual(reservation.payload, { to: 'a@example.com' });
    const extended = await handle.extend(reservation.id, reservation.lease_id, '5s');
    assert.ok(Date.parse(extended.lease_expires_at) > Date.parse(reservation.lease_expires_at));
    await handle.ack(reservation.id, reservation.lease_id);
    controller.abort();
    await assert.rejects(stream.next(), { name: 'AbortError' });

    // Nothing due: the reserve waits its worktime and answers null.
    assert.equal(await handle.reserve({ worktime: '300ms' }), null);
  });

  it("reads and changes a scheduler's webhook target and retry policy, never answering the secret", async () => {
    const SECRET = 'whsec-client-test-0123456789';
    await client.scheduler.schedulers.create({ display_name: 'SDK hooks', id: 'sdk-hooks' });
    const plain = await client.scheduler.schedulers.get('sdk-hooks');
    assert.equal(plain.display_name, 'SDK hooks');
    assert.equal(plain.target, undefined);

    const changed = await client.scheduler.schedulers.update('sdk-hooks', {
      target: { url: 'http://example.com/hook', secret: SECRET },
      retry: { max_attempts: 2 },
    });
    assert.deepEqual(changed.target, { url: 'http://example.com/hook', secret_set: true });
    assert.deepEqual(changed.retry, { max_attempts: 2, base: '5s', factor: 2, cap: '15m' });
    const read = await client.scheduler.schedulers.get('sdk-hooks');
    assert.deepEqual(read.target, { url: 'http://example.com/hook', secret_set: true });
    assert.ok(!JSON.stringify(read).includes(SECRET));
    // A PATCH without target leaves it; null removes it.
    assert.equal(
      (await client.scheduler.schedulers.update('sdk-hooks', { display_name: 'Hooks' })).display_name,
      'Hooks',
    );
    assert.deepEqual((await client.scheduler.schedulers.get('sdk-hooks')).target, changed.target);
    const removed = await client.scheduler.schedulers.update('sdk-hooks', { target: null, retry: null });
    assert.equal(removed.target, undefined);
    await assert.rejects(client.scheduler.schedulers.update('sdk-hooks', { target: { url: 'ftp://x' } }), {
      name: 'StratusError',
      status: 400,
      code: 'validation_error',
    });
    await assert.rejects(client.scheduler.schedulers.get('no-such-scheduler'), { status: 404 });
  });

  it('sets a lambda target with the platform user beside the scheduler key', async () => {
    const lambda = await client.lambda.create({ name: 'task-target', code: 'export default () => ({ body: "ok" })' });
    const created = await client.scheduler.schedulers.create({
      display_name: 'SDK lambda jobs',
      id: 'sdk-lambda-jobs',
      target: { lambda_id: lambda.id },
    });
    assert.deepEqual(created.target, { lambda_id: lambda.id });
    await client.scheduler.schedulers.update('sdk-lambda-jobs', { target: null });
    assert.deepEqual(
      (await client.scheduler.schedulers.update('sdk-lambda-jobs', { target: { lambda_id: lambda.id } })).target,
      { lambda_id: lambda.id },
    );
    // With the scheduler key alone there is no platform user to run the lambda as.
    const keyOnly = createClient({ url, schedulerKey: 'test-scheduler-key' });
    await assert.rejects(keyOnly.scheduler.schedulers.update('sdk-lambda-jobs', { target: { lambda_id: lambda.id } }), {
      status: 400,
      code: 'validation_error',
    });
    await client.scheduler.schedulers.delete('sdk-lambda-jobs');
  });

  it('lists, retries and discards dead tasks', async () => {
    const id = 'sdk-dead';
    await client.scheduler.schedulers.create({ display_name: 'SDK dead letters', id });
    const handle = client.scheduler.scheduler(id);
    const empty = await handle.dead();
    assert.deepEqual(empty, { dead: [], meta: { total: 0, page: 1, per_page: 20, total_pages: 0 } });
    // Each call starts only when awaited: a second rejection waiting meanwhile would be unhandled.
    for (const call of [() => handle.retryDead('no-such-task'), () => handle.discardDead('no-such-task')])
      await assert.rejects(call(), (error: unknown) => {
        assert.ok(error instanceof StratusError);
        assert.equal(error.status, 404);
        return true;
      });

    // A loopback webhook is refused by the egress policy: one failed attempt, and one is the most.
    await client.scheduler.schedulers.update(id, {
      target: { url: 'http://127.0.0.1:9/hook', secret: 'whsec-client-test-0123456789' },
      retry: { max_attempts: 1 },
    });
    await handle.enqueue({ id: 'doomed', payload: { n: 1 }, labels: ['kind:test'] });
    /** The dead list once it holds a task (the engine delivers within moments). */
    const deadSoon = async () => {
      const deadline = Date.now() + 10_000;
      let list = await handle.dead({ perPage: 5 });
      while (list.dead.length === 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        list = await handle.dead({ perPage: 5 });
      }
      return list;
    };
    const list = await deadSoon();
    assert.equal(list.dead.length, 1, 'the task died');
    const [dead] = list.dead;
    assert.ok(dead);
    assert.deepEqual([dead.id, dead.labels, dead.attempts, list.meta.per_page], ['doomed', ['kind:test'], 1, 5]);
    assert.match(dead.last_error ?? '', /refused/);

    // Retried, it leaves the dead list at once, is delivered again and dies again: 1 attempt, not 2.
    const retried = await handle.retryDead('doomed');
    assert.equal(retried.id, 'doomed');
    const again = await deadSoon();
    assert.deepEqual(
      again.dead.map((t) => [t.id, t.attempts]),
      [['doomed', 1]],
    );
    assert.ok(Date.parse(again.dead[0]?.failed_at ?? '') >= Date.parse(retried.future));
    await handle.discardDead('doomed');
    assert.deepEqual((await handle.dead()).dead, []);
    await assert.rejects(handle.retryDead('doomed'), { status: 404 });
    await client.scheduler.schedulers.delete(id);
  });

  it("round-trips key-value entries, the caller's config and config objects", async () => {
    await client.kv.createCollection('prefs');
    const prefs = client.kv.collection('prefs');
    await prefs.set('ui/theme', 'dark');
    assert.equal((await prefs.get('ui/theme')).value, 'dark');
    assert.ok((await prefs.list({ prefix: 'ui/' })).items.some((e) => e.key === 'ui/theme'));
    await prefs.set('ui/lang', 'en');
    const status = await client.kv.status();
    assert.equal(status.role, 'primary');
    assert.equal(status.replication.parent_connected, true);
    assert.ok(status.replication.last_seq > 0);
    assert.deepEqual(status.collections.prefs?.keys, 2);
    // A page at a time: `next` is the cursor of the following page.
    const first = await prefs.list({ prefix: 'ui/', limit: 1 });
    assert.deepEqual([first.items.map((e) => e.key), first.next], [['ui/lang'], 'ui/lang']);
    const second = await prefs.list({ prefix: 'ui/', limit: 1, after: first.next ?? '' });
    assert.deepEqual([second.items.map((e) => e.key), second.next], [['ui/theme'], null]);
    await prefs.delete('ui/theme');
    await assert.rejects(prefs.get('ui/theme'), { status: 404 });
    // Another user's namespace holds none of these collections.
    const other = createClient({ url });
    await other.auth.signup('kv-other@example.com', 'a long enough passphrase', 'kv-other');
    assert.deepEqual((await other.kv.status()).collections, {});

    assert.deepEqual(await client.config.patch({ theme: 'dark', lang: 'en' }), { theme: 'dark', lang: 'en' });
    assert.deepEqual(await client.config.patch({ lang: null }), { theme: 'dark' });
    assert.deepEqual(await client.config.get(), { theme: 'dark' });

    const object = await client.config.objects.create({ id: 'site', entries: { title: 'Shop' } });
    assert.deepEqual(object, { id: 'site', entries: { title: 'Shop' } });
    assert.deepEqual((await client.config.objects.patch('site', { footer: 'x' })).entries, {
      title: 'Shop',
      footer: 'x',
    });
    assert.deepEqual((await client.config.objects.get('site')).entries, { title: 'Shop', footer: 'x' });
    await client.config.objects.delete('site');
    await assert.rejects(client.config.objects.get('site'), { status: 404, code: 'not_found' });
  });

  it('deploys and invokes a lambda', async () => {
    const lambda = await client.lambda.create({
      name: 'hello',
      code: 'export default (req) => new Response("hi " + req.query.name)',
    });
    assert.ok((await client.lambda.list()).some((l) => l.id === lambda.id));
    const response = await client.lambda.run(lambda.id, { query: { name: 'sdk' } });
    assert.equal(response.status, 200);
    assert.equal(await response.text(), 'hi sdk');
    const testRun = await client.lambda.invoke(lambda.id, { query: { name: 'test' } });
    assert.equal(testRun.status, 200);
    const history = await client.lambda.invocations(lambda.id, { limit: 1 });
    assert.deepEqual(
      history.map((i) => [i.trigger, i.status, i.error]),
      [['invoke', 200, null]],
    );
  });

  it('reports 401 without credentials, 404 for an unknown resource and 400 for a bad body', async () => {
    const anonymous = createClient({ url });
    await assert.rejects(anonymous.kv.listCollections(), { name: 'StratusError', status: 401, code: 'unauthorized' });
    await assert.rejects(client.files.bucket('no-such-bucket').list(), { status: 404, code: 'not_found' });
    await assert.rejects(
      client.scheduler.scheduler('no-such-scheduler').enqueue({ delay: 'soon' }),
      (error: unknown) => error instanceof StratusError && error.status >= 400 && error.status < 500,
    );
    // An email longer than any address could be is refused before it is looked up.
    await assert.rejects(client.auth.login(`${'x'.repeat(400)}@example.com`, PASSWORD), {
      status: 400,
      code: 'validation_error',
    });
  });
});
