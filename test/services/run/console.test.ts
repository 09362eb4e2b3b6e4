import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { InjectOptions } from 'fastify';
import { createRunService, type DesiredDeployment, type RuntimeDriver } from '../../../src/services/run/index.ts';
import { assertError } from '../../helpers/envelope.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';
import { pushImage } from './helpers.ts';

const alice = asUser('user-alice');
const bob = asUser('user-bob');
const json = { 'content-type': 'application/json' };
const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

interface Data {
  repository: string;
  references: string[];
  env: { key: string; desired_value: string }[];
  volumes: { name: string; target: string; mode: string }[];
  desired: { state: string; reference: string | null; digest: string | null };
  history: { action: string; reference: string | null; digest: string | null; user: string; at: string }[];
  host: string | null;
  logger_id: string | null;
  driver: string;
  actual: { state: string; reference: string | null; digest: string | null; applied_at: string } | null;
}

describe('run console API', () => {
  let service: TestService;
  let v1: string;
  let v2: string;
  const name = 'my-project/my-app';

  before(async () => {
    service = await startTestService(createRunService());
    v1 = await pushImage(service.app, 'user-alice', name, 'v1', 'layer one');
    v2 = await pushImage(service.app, 'user-alice', name, 'v2', 'layer two');
  });
  after(async () => {
    await service.close();
  });

  const inject = (options: InjectOptions) => service.app.inject(options);
  const post = (path: string, body: unknown, headers = alice) =>
    inject({ method: 'POST', url: path, headers: { ...headers, ...json }, payload: JSON.stringify(body) });
  const put = (path: string, body: unknown, headers = alice) =>
    inject({ method: 'PUT', url: path, headers: { ...headers, ...json }, payload: JSON.stringify(body) });
  const get = async (repository = name) => {
    const response = await inject({
      method: 'GET',
      url: `/api/console?repository=${encodeURIComponent(repository)}`,
      headers: alice,
    });
    assert.equal(response.statusCode, 200, response.body);
    return response.json<Data>();
  };

  describe('public endpoints', () => {
    it('serves /version as text, /healthz and /readyz as ok', async () => {
      const version = await inject({ method: 'GET', url: '/version' });
      assert.equal(version.statusCode, 200);
      assert.equal(version.headers['content-type'], 'text/plain; charset=utf-8');
      assert.match(version.body, /^\d+\.\d+\.\d+/);
      for (const path of ['/healthz', '/readyz']) {
        const response = await inject({ method: 'GET', url: path });
        assert.equal(response.statusCode, 200);
        assert.match(String(response.headers['content-type']), /^text\/plain/);
        assert.equal(response.body, 'ok');
      }
    });

    it('serves the OpenAPI document titled "Stratus Run API" listing the console routes', async () => {
      const response = await inject({ method: 'GET', url: '/openapi.json' });
      assert.equal(response.statusCode, 200);
      const doc = response.json<{
        openapi: string;
        info: { title: string };
        paths: Record<string, Record<string, unknown>>;
      }>();
      assert.match(doc.openapi, /^3\.0/);
      assert.equal(doc.info.title, 'Stratus Run API');
      assert.ok(doc.paths['/api/console']?.get);
      for (const action of ['start', 'stop', 'rollback']) assert.ok(doc.paths[`/api/console/${action}`]?.post, action);
      assert.ok(doc.paths['/api/console/env']?.put);
      assert.ok(doc.paths['/api/console/volumes']?.put);
    });
  });

  describe('GET /api/console', () => {
    it('answers the console data of a pushed, never started repository', async () => {
      const data = await get();
      assert.deepEqual(data, {
        repository: name,
        references: ['v1', 'v2'],
        env: [],
        volumes: [],
        desired: { state: 'stopped', reference: null, digest: null },
        history: [],
        host: null,
        logger_id: null,
        driver: 'recording',
        actual: null,
      });
    });

    it('needs identity (401 unauthorized)', async () => {
      assertError(await inject({ method: 'GET', url: `/api/console?repository=${name}` }), 401, 'unauthorized');
      assertError(
        await inject({
          method: 'GET',
          url: `/api/console?repository=${name}`,
          headers: { 'x-gateway-authentication': '{"user":{}}' },
        }),
        401,
        'unauthorized',
      );
      assertError(await post('/api/console/start', { repository: name, reference: 'v1' }, {}), 401, 'unauthorized');
    });

    it('answers 400 validation_error for a missing, empty or malformed name', async () => {
      assertError(await inject({ method: 'GET', url: '/api/console', headers: alice }), 400, 'validation_error');
      assertError(
        await inject({ method: 'GET', url: '/api/console?repository=', headers: alice }),
        400,
        'validation_error',
      );
      assertError(
        await inject({ method: 'GET', url: '/api/console?repository=Bad/Name', headers: alice }),
        400,
        'validation_error',
      );
    });

    it("answers 404 for an unknown repository and for another user's", async () => {
      assertError(
        await inject({ method: 'GET', url: '/api/console?repository=nobody/here', headers: alice }),
        404,
        'not_found',
      );
      assertError(
        await inject({ method: 'GET', url: `/api/console?repository=${name}`, headers: bob }),
        404,
        'not_found',
      );
      assertError(await post('/api/console/start', { repository: name, reference: 'v1' }, bob), 404, 'not_found');
      assertError(await put('/api/console/env', { repository: name, env: [] }, bob), 404, 'not_found');
    });
  });

  describe('GET /api/console/repositories', () => {
    it("lists the caller's repositories by name with tags, desired and actual state; no one else's", async () => {
      await pushImage(service.app, 'user-bob', 'bob/app', 'latest', 'bob layer');
      await pushImage(service.app, 'user-alice', 'alpha/one', 'x', 'alpha layer');
      const response = await inject({ method: 'GET', url: '/api/console/repositories', headers: alice });
      assert.equal(response.statusCode, 200, response.body);
      const body = response.json<{
        driver: string;
        repositories: {
          repository: string;
          references: string[];
          desired: unknown;
          actual: unknown;
          created_at: string;
        }[];
      }>();
      assert.equal(body.driver, 'recording');
      assert.deepEqual(
        body.repositories.map((r) => r.repository),
        ['alpha/one', name],
      );
      const mine = body.repositories.find((r) => r.repository === name)!;
      assert.deepEqual(mine.references, ['v1', 'v2']);
      assert.deepEqual(mine.desired, (await get()).desired);
      assert.deepEqual(mine.actual, (await get()).actual);
      assert.match(mine.created_at, RFC3339);
      const bobs = await inject({ method: 'GET', url: '/api/console/repositories', headers: bob });
      assert.deepEqual(
        bobs.json<{ repositories: { repository: string }[] }>().repositories.map((r) => r.repository),
        ['bob/app'],
      );
    });

    it('needs identity (401 unauthorized)', async () => {
      assertError(await inject({ method: 'GET', url: '/api/console/repositories' }), 401, 'unauthorized');
    });
  });

  describe('start, stop, rollback', () => {
    it('starts at a tag: desired running at its digest, a history entry, and the driver applied it', async () => {
      const response = await post('/api/console/start', { repository: name, reference: 'v1' });
      assert.equal(response.statusCode, 200, response.body);
      const data = response.json<Data>();
      assert.deepEqual(data.desired, { state: 'running', reference: 'v1', digest: v1 });
      assert.equal(data.history.length, 1);
      const entry = data.history[0]!;
      assert.deepEqual(
        { ...entry, at: 'x' },
        { action: 'start', reference: 'v1', digest: v1, user: 'user-alice', at: 'x' },
      );
      assert.match(entry.at, RFC3339);
      // The recording driver runs nothing, so it never says it runs (decisions 49).
      assert.deepEqual(
        { ...data.actual, applied_at: 'x' },
        { state: 'unknown', reference: 'v1', digest: v1, applied_at: 'x' },
      );
      assert.deepEqual(await get(), data);
      // Its host is given at the first start: the name made a DNS label.
      assert.equal(data.host, 'my-project-my-app.run.localhost');
    });

    it('answers on its host only what the driver runs: the recording driver runs nothing (503), an unknown host is 404', async () => {
      const answer = await inject({
        method: 'GET',
        url: '/hello',
        headers: { host: 'my-project-my-app.run.localhost' },
      });
      assert.equal(answer.statusCode, 503, answer.body);
      assert.equal(answer.json<{ error: { code: string } }>().error.code, 'not_running');
      const unknown = await inject({ method: 'GET', url: '/', headers: { host: 'nothing-here.run.localhost' } });
      assert.equal(unknown.statusCode, 404, unknown.body);
      assert.equal(unknown.json<{ error: { code: string } }>().error.code, 'no_route');
    });

    it('gives repositories whose names make the same label distinct hosts', async () => {
      await pushImage(service.app, 'user-alice', 'my-project/my.app', 'v1', 'dotted layer');
      const started = await post('/api/console/start', { repository: 'my-project/my.app', reference: 'v1' });
      assert.equal(started.statusCode, 200, started.body);
      assert.equal(started.json<Data>().host, 'my-project-my-app-2.run.localhost');
      assert.equal((await get()).host, 'my-project-my-app.run.localhost', 'the first keeps its host');
    });

    it('starts by digest (reference null)', async () => {
      const data = (await post('/api/console/start', { repository: name, digest: v2 })).json<Data>();
      assert.deepEqual(data.desired, { state: 'running', reference: null, digest: v2 });
      assert.deepEqual(data.history.at(-1)?.action, 'start');
      assert.equal(data.history.at(-1)?.digest, v2);
    });

    it('stops (keeping reference and digest); stopping again adds no history entry', async () => {
      const first = await post('/api/console/stop', { repository: name });
      assert.equal(first.statusCode, 200, first.body);
      const data = first.json<Data>();
      assert.deepEqual(data.desired, { state: 'stopped', reference: null, digest: v2 });
      assert.deepEqual(data.history.at(-1), { ...data.history.at(-1), action: 'stop', reference: null, digest: v2 });
      assert.equal(data.actual?.state, 'unknown');
      const again = (await post('/api/console/stop', { repository: name })).json<Data>();
      assert.equal(again.history.length, data.history.length);
      assert.equal(again.desired.state, 'stopped');
    });

    it('rolls back to any existing reference, recorded as rollback', async () => {
      const data = (await post('/api/console/rollback', { repository: name, reference: 'v1' })).json<Data>();
      assert.deepEqual(data.desired, { state: 'running', reference: 'v1', digest: v1 });
      assert.deepEqual(
        data.history.map((h) => h.action),
        ['start', 'start', 'stop', 'rollback'],
      );
      const byDigest = (await post('/api/console/rollback', { repository: name, digest: v2 })).json<Data>();
      assert.deepEqual(byDigest.desired, { state: 'running', reference: null, digest: v2 });
    });

    it('refuses both or neither of reference and digest, bad values, and unknown fields (400)', async () => {
      for (const path of ['/api/console/start', '/api/console/rollback']) {
        assertError(await post(path, { repository: name }), 400, 'validation_error');
        assertError(await post(path, { repository: name, reference: 'v1', digest: v1 }), 400, 'validation_error');
        assertError(await post(path, { repository: name, reference: 7 }), 400, 'validation_error');
        assertError(await post(path, { repository: name, digest: 'sha256:nothex' }), 400, 'validation_error');
        assertError(await post(path, { repository: name, reference: 'v1', extra: true }), 400, 'validation_error');
        assertError(await post(path, { reference: 'v1' }), 400, 'validation_error');
      }
      assertError(await post('/api/console/stop', {}), 400, 'validation_error');
      const malformed = await inject({
        method: 'POST',
        url: '/api/console/start',
        headers: { ...alice, ...json },
        payload: '{"repository":',
      });
      assertError(malformed, 400, 'invalid_json');
    });

    it('answers 404 for an unknown reference or digest, and changes nothing', async () => {
      const before = await get();
      assertError(await post('/api/console/start', { repository: name, reference: 'v9' }), 404, 'not_found');
      assertError(
        await post('/api/console/rollback', { repository: name, digest: `sha256:${'0'.repeat(64)}` }),
        404,
        'not_found',
      );
      assertError(await post('/api/console/stop', { repository: 'nobody/here' }), 404, 'not_found');
      assert.deepEqual(await get(), before);
    });
  });

  describe('env and volumes', () => {
    it('saves, replaces and clears env; answers the console data', async () => {
      const saved = await put('/api/console/env', {
        repository: name,
        env: [
          { key: 'LOG_LEVEL', desired_value: 'debug' },
          { key: '_X1', desired_value: '' },
        ],
      });
      assert.equal(saved.statusCode, 200, saved.body);
      assert.deepEqual(saved.json<Data>().env, [
        { key: 'LOG_LEVEL', desired_value: 'debug' },
        { key: '_X1', desired_value: '' },
      ]);
      await put('/api/console/env', { repository: name, env: [{ key: 'B', desired_value: '2' }] });
      assert.deepEqual((await get()).env, [{ key: 'B', desired_value: '2' }]);
      await put('/api/console/env', { repository: name, env: [] });
      assert.deepEqual((await get()).env, []);
    });

    it('refuses bad env keys, duplicates and non-string values (400), keeping the saved list', async () => {
      await put('/api/console/env', { repository: name, env: [{ key: 'KEEP', desired_value: '1' }] });
      for (const env of [
        [{ key: '1BAD', desired_value: 'x' }],
        [{ key: 'A-B', desired_value: 'x' }],
        [
          { key: 'A', desired_value: 'x' },
          { key: 'A', desired_value: 'y' },
        ],
        [{ key: 'A', desired_value: 1 }],
        [{ key: 'A' }],
        [{ key: 'A', desired_value: 'x', extra: 1 }],
        'nope',
      ]) {
        assertError(await put('/api/console/env', { repository: name, env }), 400, 'validation_error');
      }
      assertError(await put('/api/console/env', { repository: name }), 400, 'validation_error');
      assert.deepEqual((await get()).env, [{ key: 'KEEP', desired_value: '1' }]);
    });

    it('saves volumes with rw as the default mode', async () => {
      const saved = await put('/api/console/volumes', {
        repository: name,
        volumes: [
          { name: 'my-data', target: '/data', mode: 'ro' },
          { name: 'cache', target: '/var/cache' },
        ],
      });
      assert.equal(saved.statusCode, 200, saved.body);
      assert.deepEqual(saved.json<Data>().volumes, [
        { name: 'my-data', target: '/data', mode: 'ro' },
        { name: 'cache', target: '/var/cache', mode: 'rw' },
      ]);
      assert.deepEqual((await get()).volumes, saved.json<Data>().volumes);
    });

    it('sets no logger without the logs service (503, nothing saved); null clears; a bad body is a 400', async () => {
      assertError(
        await put('/api/console/logger', { repository: name, logger_id: 'logger-x' }),
        503,
        'service_unavailable',
      );
      assert.equal((await get()).logger_id, null);
      const cleared = await put('/api/console/logger', { repository: name, logger_id: null });
      assert.equal(cleared.statusCode, 200, cleared.body);
      assert.equal(cleared.json<Data>().logger_id, null);
      for (const body of [
        { repository: name },
        { repository: name, logger_id: '' },
        { repository: name, logger_id: 3 },
      ])
        assertError(await put('/api/console/logger', body), 400, 'validation_error');
      assertError(await put('/api/console/logger', { repository: 'bob/app', logger_id: null }), 404, 'not_found');
    });

    it('refuses bad volumes (400): empty or duplicate name, relative target, unknown mode', async () => {
      const before = (await get()).volumes;
      for (const volumes of [
        [{ name: '', target: '/data', mode: 'rw' }],
        [{ name: 'a', target: 'data', mode: 'rw' }],
        [{ name: 'a', target: '/data', mode: 'rx' }],
        [
          { name: 'a', target: '/a' },
          { name: 'a', target: '/b' },
        ],
        [{ name: 'a' }],
      ]) {
        assertError(await put('/api/console/volumes', { repository: name, volumes }), 400, 'validation_error');
      }
      assert.deepEqual((await get()).volumes, before);
    });
  });

  describe('routes that do not exist', () => {
    it('has no run, deploy, push or exec endpoint and no container_id (404), and 405 for a wrong method', async () => {
      for (const method of ['GET', 'POST', 'PUT', 'DELETE'] as const) {
        assertError(await inject({ method, url: '/api/console/run', headers: alice }), 404, 'not_found');
      }
      for (const path of ['/v1/run/deploy', '/v1/run/push', '/v1/run/exec', '/api/console/container_id']) {
        assertError(
          await inject({ method: 'POST', url: path, headers: { ...alice, ...json }, payload: '{}' }),
          404,
          'not_found',
        );
      }
      assert.ok(!JSON.stringify(await get()).includes('container_id'));
      assertError(
        await inject({ method: 'GET', url: '/api/console/start', headers: alice }),
        405,
        'method_not_allowed',
      );
    });
  });
});

describe('run console with a driver', () => {
  const calls: { repository: string; desired: DesiredDeployment }[] = [];
  let failing = false;
  const driver: RuntimeDriver = {
    name: 'test',
    async apply(repository, desired) {
      if (failing) throw new Error('engine unreachable');
      calls.push({ repository, desired });
    },
    async ready() {
      return !failing;
    },
  };
  let service: TestService;
  let v1: string;
  before(async () => {
    service = await startTestService(createRunService({ driver: () => driver }));
    v1 = await pushImage(service.app, 'user-alice', 'drv/app', 'v1');
  });
  after(async () => {
    await service.close();
  });
  const post = (path: string, body: unknown) =>
    service.app.inject({ method: 'POST', url: path, headers: { ...alice, ...json }, payload: JSON.stringify(body) });

  it('passes the desired state with env and volumes, and re-applies a running repository when its env changes', async () => {
    await service.app.inject({
      method: 'PUT',
      url: '/api/console/env',
      headers: { ...alice, ...json },
      payload: JSON.stringify({ repository: 'drv/app', env: [{ key: 'A', desired_value: '1' }] }),
    });
    assert.equal(calls.length, 0, 'a stopped repository is not re-applied on an env change');
    await post('/api/console/start', { repository: 'drv/app', reference: 'v1' });
    assert.deepEqual(calls.at(-1), {
      repository: 'drv/app',
      desired: { state: 'running', reference: 'v1', digest: v1, env: [{ key: 'A', desired_value: '1' }], volumes: [] },
    });
    await service.app.inject({
      method: 'PUT',
      url: '/api/console/volumes',
      headers: { ...alice, ...json },
      payload: JSON.stringify({ repository: 'drv/app', volumes: [{ name: 'd', target: '/d' }] }),
    });
    assert.equal(calls.length, 2);
    assert.deepEqual(calls.at(-1)?.desired.volumes, [{ name: 'd', target: '/d', mode: 'rw' }]);
  });

  it('reports a driver failure as 502 driver_error, keeps the saved desired state, and /readyz answers 503', async () => {
    failing = true;
    try {
      assertError(await post('/api/console/stop', { repository: 'drv/app' }), 502, 'driver_error');
      const data = (
        await service.app.inject({ method: 'GET', url: '/api/console?repository=drv/app', headers: alice })
      ).json<Data>();
      assert.equal(data.desired.state, 'stopped');
      assert.equal(data.actual, null, 'a driver without status() reports no actual state');
      assertError(await service.app.inject({ method: 'GET', url: '/readyz' }), 503, 'not_ready');
    } finally {
      failing = false;
    }
  });
});
