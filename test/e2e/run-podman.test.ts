// The podman driver with a real engine (issue 24): images pushed with skopeo are assembled from the
// platform's own blobs, started, replaced only once the new one is up, rolled back, stopped, and
// reconciled after a platform restart. Skipped (with the engine's word) only when the machine
// cannot run containers at all.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/http.ts';
import {
  buildBusyboxImage,
  podmanAvailable,
  pushImage,
  removeContainers,
  removeImage,
  runPodman,
} from '../helpers/podman.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';
import { createApiKey } from '../helpers/apikeys.ts';

const USER = 'user-podman';
const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: USER } }) };
const json = { 'content-type': 'application/json' };

interface Actual {
  state: string;
  reference: string | null;
  digest: string | null;
  applied_at: string;
  exit_code?: number;
  message?: string;
}
interface Data {
  repository: string;
  host: string | null;
  driver: string;
  desired: { state: string; reference: string | null; digest: string | null };
  actual: Actual | null;
}

const availability = await podmanAvailable();

describe('run service with RUN_DRIVER=podman', { skip: availability.ok ? false : availability.reason }, () => {
  const env = availability.ok ? availability.env : process.env;
  const run = randomBytes(4).toString('hex');
  const repository = `podman-${run}/web`;
  const tags = {
    v1: `stratus-test/web-v1-${run}`,
    v2: `stratus-test/web-v2-${run}`,
    bad: `stratus-test/bad-${run}`,
    talker: `stratus-test/talker-${run}`,
    nope: `stratus-test/nope-${run}`,
  };
  const talker = `podman-${run}/talker`;
  let database: TestDatabase;
  let server: ServedProcess;
  let scope = '';
  const settings = () => ({
    DATA_DIR: database.dataDir,
    DATABASE_URL: database.databaseUrl,
    RUN_DRIVER: 'podman',
    CONTAINERS_CONF: env.CONTAINERS_CONF,
    RUN_START_TIMEOUT: '10',
    RUN_STOP_TIMEOUT: '1',
  });

  const console = async (method: string, path: string, body?: unknown) => {
    const answer = await request(server.internalPort, {
      method,
      path,
      host: 'run.localhost',
      headers: { ...identity, ...(body === undefined ? {} : json) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return answer;
  };
  const data = async (): Promise<Data> => {
    const answer = await console('GET', `/api/console?repository=${repository}`);
    assert.equal(answer.status, 200, answer.text);
    return answer.json<Data>();
  };
  /** This repository's containers as the engine lists them (`podman ps`), labels included. */
  const containers = async () =>
    JSON.parse(
      await runPodman(env, [
        'ps',
        '--all',
        '--format',
        'json',
        '--filter',
        `label=io.stratus.repository=${repository}`,
      ]),
    ) as {
      Id: string;
      ImageID: string;
      State: string;
      Labels: Record<string, string>;
      Ports: { host_port: number }[] | null;
    }[];
  /** GET / of the running container through its loopback port. */
  const served = async (): Promise<string> => {
    const running = (await containers()).filter((c) => c.State === 'running');
    assert.equal(running.length, 1, `one running container, not ${running.length}`);
    const port = running[0]!.Ports?.[0]?.host_port;
    assert.ok(port, 'published on a loopback port');
    const answer = await request(port, { path: '/', host: `127.0.0.1:${port}` });
    assert.equal(answer.status, 200);
    return answer.text.trim();
  };

  /** GET / through the gateway's public port at the repository's host, as a visitor would. */
  const throughGateway = async (host: string): Promise<{ status: number; text: string }> => {
    const answer = await request(server.publicPort, { path: '/', host: `${host}:${server.publicPort}` });
    return { status: answer.status, text: answer.text.trim() };
  };
  let host = '';
  const imageIds: string[] = [];

  before(async () => {
    database = await createTestDatabase();
    await buildBusyboxImage(env, { tag: tags.v1, files: { '/www/index.html': 'web v1\n' }, port: 8000 });
    await buildBusyboxImage(env, { tag: tags.v2, files: { '/www/index.html': 'web v2\n' }, port: 8000 });
    // An image that exits at once: starting it must leave the running one serving.
    await buildBusyboxImage(env, {
      tag: tags.bad,
      entrypoint: ['/bin/busybox', 'sh', '-c', 'echo cannot start; exit 3'],
      port: 8000,
    });
    // An image whose entrypoint does not exist: the engine itself refuses to start it.
    await buildBusyboxImage(env, { tag: tags.nope, entrypoint: ['/no/such/program'], port: 8000 });
    // Writes a line to stdout, one to stderr, then one a second, while serving on 8000.
    await buildBusyboxImage(env, {
      tag: tags.talker,
      files: { '/www/index.html': 'talker\n' },
      entrypoint: [
        '/bin/busybox',
        'sh',
        '-c',
        'echo hello from the container; echo warning on stderr >&2; (n=0; while true; do n=$((n+1)); echo tick $n; sleep 1; done) & exec /bin/busybox httpd -f -p 8000 -h /www',
      ],
      port: 8000,
    });
    server = await serve([], settings());
    const { key, secret } = await createApiKey(server.internalPort, identity, 'podman');
    const registry = `localhost:${server.publicPort}`;
    const push = { registry, repository, username: key, password: secret };
    await pushImage(env, { ...push, tag: tags.v1, reference: 'v1', format: 'v2s2' });
    await pushImage(env, { ...push, tag: tags.v2, reference: 'v2', format: 'oci' });
    await pushImage(env, { ...push, tag: tags.bad, reference: 'bad' });
    await pushImage(env, { ...push, tag: tags.nope, reference: 'nope' });
    await pushImage(env, { ...push, repository: talker, tag: tags.talker, reference: 'latest' });
    // The engine must get the images from the platform's blobs, not from what built them. The
    // ids stay the same (the config's digest), so they can be removed again at the end.
    for (const tag of Object.values(tags)) {
      imageIds.push((await runPodman(env, ['image', 'inspect', '--format', '{{.Id}}', tag])).trim());
      await removeImage(env, tag);
    }
  });

  after(async () => {
    await server?.stop();
    if (scope) await removeContainers(env, `io.stratus.scope=${scope}`);
    for (const tag of Object.values(tags)) await removeImage(env, tag).catch(() => undefined);
    // What the driver loaded from the platform's blobs.
    for (const id of imageIds) await runPodman(env, ['rmi', '--force', id]).catch(() => undefined);
    await database?.cleanup();
  });

  it('starts a pushed image from the console API: the engine runs it and actual says so', async () => {
    const started = await console('POST', '/api/console/start', { repository, reference: 'v1' });
    assert.equal(started.status, 200, `${started.text}\n${server.output().slice(-2000)}`);
    const body = started.json<Data>();
    assert.equal(body.driver, 'podman');
    assert.equal(body.actual?.state, 'running');
    assert.equal(body.actual?.reference, 'v1');
    assert.equal(body.actual?.digest, body.desired.digest);
    assert.equal(await served(), 'web v1');
    // Reached through the gateway at its host, like any visitor.
    host = body.host ?? '';
    assert.equal(host, `podman-${run}-web.run.localhost`);
    assert.deepEqual(await throughGateway(host), { status: 200, text: 'web v1' });
    const [container] = await containers();
    scope = container!.Labels['io.stratus.scope'] ?? '';
    assert.match(scope, /^[0-9a-f]{12}$/);
    assert.equal(container!.Labels['io.stratus.digest'], body.desired.digest);
  });

  it('replaces the container with a new reference only once the new one is up', async () => {
    const before = (await containers()).map((c) => c.Id);
    const started = await console('POST', '/api/console/start', { repository, reference: 'v2' });
    assert.equal(started.status, 200, started.text);
    assert.equal(started.json<Data>().actual?.reference, 'v2');
    assert.equal(await served(), 'web v2');
    assert.deepEqual(await throughGateway(host), { status: 200, text: 'web v2' });
    const after = await containers();
    assert.equal(after.length, 1, 'the old container is removed');
    assert.ok(!before.includes(after[0]!.Id));
  });

  it('a failing image leaves the previous one serving and says why', async () => {
    const started = await console('POST', '/api/console/start', { repository, reference: 'bad' });
    assert.equal(started.status, 502, started.text);
    const error = started.json<{ error: { code: string; message: string } }>().error;
    assert.equal(error.code, 'driver_error');
    assert.match(error.message, /exited with code 3/);
    assert.match(error.message, /cannot start/, "the container's own output is in the message");
    assert.equal(await served(), 'web v2');
    const current = await data();
    assert.equal(current.desired.reference, 'bad', 'the desired state stays saved');
    assert.equal(current.actual?.state, 'running');
    assert.equal(current.actual?.reference, 'v2', 'actual is what the engine runs');
    assert.match(current.actual?.message ?? '', /exited with code 3/);
    assert.deepEqual(await throughGateway(host), { status: 200, text: 'web v2' });
    const refused = await console('POST', '/api/console/start', { repository, reference: 'nope' });
    assert.equal(refused.status, 502, refused.text);
    assert.match(
      refused.json<{ error: { message: string } }>().error.message,
      /the engine could not start it: .*no such file or directory/,
    );
    assert.equal(await served(), 'web v2');
  });

  it('rolls back to an earlier reference; env and volumes restart it with the new configuration', async () => {
    const rolled = await console('POST', '/api/console/rollback', { repository, reference: 'v1' });
    assert.equal(rolled.status, 200, rolled.text);
    assert.equal(await served(), 'web v1');
    assert.equal(rolled.json<Data>().actual?.message, undefined, 'a success clears the last failure');

    const saved = await console('PUT', '/api/console/env', {
      repository,
      env: [{ key: 'GREETING', desired_value: 'hello podman' }],
    });
    assert.equal(saved.status, 200, saved.text);
    const volumes = await console('PUT', '/api/console/volumes', {
      repository,
      volumes: [{ name: 'data', target: '/data' }],
    });
    assert.equal(volumes.status, 200, volumes.text);
    const [container] = (await containers()).filter((c) => c.State === 'running');
    assert.ok(container);
    const printed = await runPodman(env, ['exec', container.Id, '/bin/busybox', 'env']);
    assert.ok(printed.split('\n').includes('GREETING=hello podman'), printed);
    await runPodman(env, ['exec', container.Id, '/bin/busybox', 'sh', '-c', 'echo kept > /data/file']);
    // The volume's data lives under DATA_DIR, where the platform keeps its own.
    const root = join(database.dataDir, 'run', 'volumes');
    const files = readdirSync(root, { recursive: true }).map(String);
    assert.ok(
      files.some((f) => f.endsWith('file') && existsSync(join(root, f))),
      `the file is under ${root}: ${files.join(', ')}`,
    );
  });

  it("sends a container's output to the logger its repository names, live, only to a logger of the owner's", async () => {
    const logs = (method: string, path: string, body?: unknown, user = USER) =>
      request(server.internalPort, {
        method,
        path,
        host: 'logs.localhost',
        headers: { 'x-gateway-authentication': JSON.stringify({ user: { id: user } }), ...json },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const mine = await logs('POST', '/v1/loggers', { name: `talker-${run}` });
    assert.equal(mine.status, 201, mine.text);
    const loggerId = mine.json<{ id: string }>().id;
    const theirs = await logs('POST', '/v1/loggers', { name: `other-${run}` }, 'user-someone-else');
    assert.equal(theirs.status, 201, theirs.text);
    const refused = await console('PUT', '/api/console/logger', {
      repository: talker,
      logger_id: theirs.json<{ id: string }>().id,
    });
    assert.equal(refused.status, 400, refused.text);
    const set = await console('PUT', '/api/console/logger', { repository: talker, logger_id: loggerId });
    assert.equal(set.status, 200, set.text);
    assert.equal(set.json<Data & { logger_id: string }>().logger_id, loggerId);
    const started = await console('POST', '/api/console/start', { repository: talker, reference: 'latest' });
    assert.equal(started.status, 200, started.text);
    const deadline = Date.now() + 20_000;
    let text = '';
    while (!/tick 2/.test(text)) {
      assert.ok(Date.now() < deadline, `the container's lines reach the logger: ${JSON.stringify(text)}`);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const read = await logs('GET', `/v1/loggers/${loggerId}/filter`);
      assert.equal(read.status, 200, read.text);
      text = read.text;
    }
    const lines = text.split('\n');
    assert.ok(lines.includes('hello from the container'), text);
    assert.ok(lines.includes('warning on stderr'), `stderr too: ${JSON.stringify(text)}`);
    assert.ok(lines.includes('tick 1'), text);
    assert.equal(lines.filter((l) => l === 'tick 1').length, 1, 'each line once');
    const stopped = await console('POST', '/api/console/stop', { repository: talker });
    assert.equal(stopped.status, 200, stopped.text);
  });

  it('lists the caller’s repositories with desired and actual state', async () => {
    const listed = await console('GET', '/api/console/repositories');
    assert.equal(listed.status, 200, listed.text);
    const body = listed.json<{ driver: string; repositories: { repository: string; actual: Actual | null }[] }>();
    assert.equal(body.driver, 'podman');
    const mine = body.repositories.find((r) => r.repository === repository);
    assert.equal(mine?.actual?.state, 'running');
    assert.equal(mine?.actual?.reference, 'v1');
  });

  it('reconciles after a platform restart: a lost container comes back, a container nothing wants goes', async () => {
    const [running] = await containers();
    assert.ok(running);
    await server.stop();
    // Containers outlive the platform; one lost while it was down must come back.
    await removeContainers(env, `io.stratus.repository=${repository}`);
    // A container of this platform for a repository that should not run (left by a crash, say).
    const stray = `podman-${run}/stray`;
    await runPodman(env, [
      'run',
      '--detach',
      '--label',
      `io.stratus.scope=${scope}`,
      '--label',
      `io.stratus.repository=${stray}`,
      running.ImageID,
    ]);
    server = await serve([], settings());
    const deadline = Date.now() + 30_000;
    while ((await data()).actual?.state !== 'running') {
      assert.ok(Date.now() < deadline, `not running again: ${JSON.stringify((await data()).actual)}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    assert.equal(await served(), 'web v1');
    const strays = async () =>
      runPodman(env, ['ps', '--all', '--quiet', '--filter', `label=io.stratus.repository=${stray}`]);
    while ((await strays()).trim() !== '') {
      assert.ok(Date.now() < deadline, 'the stray container is removed');
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  });

  it('stops: the container is removed and actual says stopped', async () => {
    const stopped = await console('POST', '/api/console/stop', { repository });
    assert.equal(stopped.status, 200, stopped.text);
    assert.equal(stopped.json<Data>().actual?.state, 'stopped');
    assert.deepEqual(await containers(), []);
    await new Promise((resolve) => setTimeout(resolve, 1100)); // routes are reused for a second
    const gone = await throughGateway(host);
    assert.equal(gone.status, 503, gone.text);
  });
});
