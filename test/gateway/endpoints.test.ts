import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { User } from '../../src/services/auth/repository.ts';
import { startHarness, type Harness } from './harness.ts';

const GO_DURATION = /^(0s|\d+(\.\d+)?(ns|µs|ms|s)|(\d+h)?(\d+m)?\d+(\.\d+)?s)$/;

describe('gateway endpoints (gateway.md §4)', () => {
  let h: Harness;
  /** Owner of the projects zeta and alpha (made in the first test). */
  let ada: User;
  before(async () => {
    h = await startHarness();
  });
  after(async () => {
    await h.close();
  });

  it("lists the platform hosts, then the caller's own project hosts in creation order", async () => {
    ada = await h.user('vh@example.com');
    const bob = await h.user('vh-bob@example.com');
    await h.createProject(ada, 'zeta');
    await h.createProject(ada, 'alpha');
    await h.createProject(bob, 'bobs');
    const platform = [
      'api',
      'gateway',
      'auth',
      'apikeys',
      'lambda',
      'scheduler',
      'docdb',
      'logs',
      'files',
      'config',
      'run',
      'kv',
      'console',
    ].map((h) => `${h}.localhost`);
    const asAda = await h.call({
      path: '/v0/virtualhosts',
      host: 'gateway.localhost',
      headers: { authorization: `Bearer ${await h.session(ada)}` },
    });
    assert.equal(asAda.status, 200);
    assert.deepEqual(asAda.json(), [...platform, 'zeta.localhost', 'alpha.localhost']);
    const anonymous = await h.call({ path: '/v0/virtualhosts', host: 'gateway.localhost' });
    assert.deepEqual(anonymous.json(), platform, 'anonymous callers see no project');
    const asBob = await h.call({
      path: '/v0/virtualhosts',
      host: 'gateway.localhost',
      headers: { authorization: `Bearer ${await h.session(bob)}` },
    });
    assert.deepEqual(asBob.json(), [...platform, 'bobs.localhost']);
  });

  it('counts requests per host, with * and -noroute- first and Go durations', async () => {
    await h.call({ path: '/x', host: 'docdb.localhost' });
    await h.call({ path: '/', host: 'nowhere.example' });
    await h.call({ path: '/', host: 'nowhere.example' });
    const rows = (await h.call({ path: '/v0/stats', host: 'api.localhost' })).json<
      {
        host: string;
        served_requests: number;
        serving_time: string;
        latency_avg: string;
        uptime: string;
        start_timestamp: string;
      }[]
    >();
    assert.equal(rows[0]!.host, '*');
    assert.equal(rows[1]!.host, '-noroute-');
    assert.equal(rows[1]!.served_requests, 2);
    const hosts = rows.slice(2).map((r) => r.host);
    assert.ok(hosts.indexOf('gateway.localhost') < hosts.indexOf('docdb.localhost'), 'hosts in order of first request');
    const total = rows.slice(1).reduce((n, r) => n + r.served_requests, 0);
    assert.equal(rows[0]!.served_requests, total, '* counts every completed request');
    for (const row of rows) {
      for (const field of ['serving_time', 'latency_avg', 'uptime'] as const)
        assert.match(row[field], GO_DURATION, `${row.host} ${field}: ${row[field]}`);
      assert.match(row.start_timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    }
  });

  it('counts the requests answered with a 5xx status per host (server_errors), for error rates', async () => {
    // files runs nowhere in the harness: 503 service_unavailable; docdb's echo answers 200.
    for (let i = 0; i < 3; i++) assert.equal((await h.call({ path: '/x', host: 'files.localhost' })).status, 503);
    assert.equal((await h.call({ path: '/x', host: 'docdb.localhost' })).status, 200);
    const rows = (await h.call({ path: '/v0/stats', host: 'api.localhost' })).json<
      { host: string; served_requests: number; server_errors: number }[]
    >();
    const row = (host: string) => rows.find((r) => r.host === host);
    assert.deepEqual([row('files.localhost')?.served_requests, row('files.localhost')?.server_errors], [3, 3]);
    assert.equal(row('docdb.localhost')?.server_errors, 0);
    assert.ok((row('*')?.server_errors ?? 0) >= 3);
  });

  it("shows a project host's traffic and health to its owner only", async () => {
    const carol = await h.user('vh-carol@example.com');
    await h.createProject(carol, 'carols');
    await h.call({ path: '/anything', host: 'carols.localhost' });
    const hosts = async (path: string, headers: Record<string, string> = {}) =>
      (await h.call({ path, host: 'gateway.localhost', headers })).json<{ host: string }[]>().map((row) => row.host);
    const asCarol = { authorization: `Bearer ${await h.session(carol)}` };
    assert.ok((await hosts('/v0/stats', asCarol)).includes('carols.localhost'));
    assert.ok((await hosts('/v0/status', asCarol)).includes('carols.localhost'));
    for (const path of ['/v0/stats', '/v0/status']) {
      const anonymous = await hosts(path);
      assert.ok(anonymous.length > 0);
      assert.ok(
        !anonymous.some((host) =>
          !host.includes('.')
            ? false
            : !/^(api|gateway|auth|apikeys|lambda|scheduler|docdb|logs|files|config|run|kv|console)\.localhost$/.test(
                host,
              ),
        ),
        `${path} shows anonymous callers platform hosts only: ${anonymous.join()}`,
      );
    }
  });

  it('probes every backend service and project host', async () => {
    const rows = (
      await h.call({
        path: '/v0/status',
        host: 'gateway.localhost',
        headers: { authorization: `Bearer ${await h.session(ada)}` },
      })
    ).json<{ id: string; name: string; host: string; status: number; statusText: string }[]>();
    const byId = new Map(rows.map((r) => [r.id, r]));
    assert.deepEqual(
      rows.slice(0, 11).map((r) => r.id),
      ['auth', 'apikeys', 'lambda', 'scheduler', 'docdb', 'logs', 'files', 'config', 'run', 'kv', 'console'],
    );
    assert.deepEqual(byId.get('apikeys'), {
      id: 'apikeys',
      name: 'apikeys',
      host: 'apikeys.localhost',
      status: 200,
      statusText: '200 OK',
    });
    assert.equal(byId.get('scheduler')?.status, 503, 'not running anywhere this gateway knows');
    assert.equal(byId.get('scheduler')?.statusText, '503 Service Unavailable');
    const project = rows.find((r) => r.host === 'zeta.localhost');
    assert.ok(project?.id.startsWith('project-'));
    assert.equal(project?.name, 'zeta');
  });

  it('lists this instance at /v0/instances for a signed-in caller, 401 otherwise', async () => {
    const anonymous = await h.call({ path: '/v0/instances', host: 'gateway.localhost' });
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.json<{ error: { status: number; code: string } }>().error.code, 'unauthorized');
    const res = await h.call({
      path: '/v0/instances',
      host: 'api.localhost',
      headers: { authorization: `Bearer ${await h.session(ada)}` },
    });
    assert.equal(res.status, 200);
    const { instances } = res.json<{ instances: { id: string; answering: boolean; served_requests: number }[] }>();
    assert.equal(instances.length, 1);
    assert.equal(instances[0]!.id, h.instance.id);
    assert.equal(instances[0]!.answering, true);
    const stats = (await h.call({ path: '/v0/stats', host: 'api.localhost' })).json<{ served_requests: number }[]>();
    assert.equal(instances[0]!.served_requests, stats[0]!.served_requests - 1, 'its * count (the stats call since)');
  });

  it('lists the routing table and the route policy at /v0/routes for a signed-in caller, 401 otherwise', async () => {
    assert.equal((await h.call({ path: '/v0/routes', host: 'gateway.localhost' })).status, 401);
    const res = await h.call({
      path: '/v0/routes',
      host: 'api.localhost',
      headers: { authorization: `Bearer ${await h.session(ada)}` },
    });
    assert.equal(res.status, 200, res.text);
    const body = res.json<{
      api_prefixes: { prefix: string; service: string }[];
      policies: { configured: unknown[]; defaults: { host: string; prefix: string; auth: string }[] };
    }>();
    assert.deepEqual(
      body.api_prefixes.find((p) => p.prefix === '/v2/'),
      { prefix: '/v2/', service: 'run' },
    );
    assert.deepEqual(
      body.api_prefixes.find((p) => p.prefix === '/v1/buckets'),
      { prefix: '/v1/buckets', service: 'files' },
    );
    const lengths = body.api_prefixes.map((p) => p.prefix.length);
    assert.deepEqual(
      lengths,
      [...lengths].sort((a, b) => b - a),
      'longest first, the order they are matched in',
    );
    assert.deepEqual(body.policies.configured, []);
    assert.deepEqual(body.policies.defaults.at(-1), { host: '*', prefix: '/', auth: 'optional' });
    assert.ok(body.policies.defaults.some((r) => r.host === 'kv' && r.prefix === '/' && r.auth === 'require'));
  });

  it('protects /v0/secret', async () => {
    assert.equal((await h.call({ path: '/v0/secret', host: 'gateway.localhost' })).status, 401);
    const ada = await h.user('secret@example.com');
    const res = await h.call({
      path: '/v0/secret',
      host: 'api.localhost',
      headers: { cookie: `stratus_session=${await h.session(ada)}` },
    });
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^text\/plain/);
    assert.equal(res.text, 'OK');
  });

  it('describes itself in OpenAPI 3.0.3', async () => {
    const doc = (await h.call({ path: '/openapi.json', host: 'gateway.localhost' })).json<{
      openapi: string;
      info: { title: string; version: string };
      paths: Record<string, { get?: { summary?: string; responses: Record<string, { description?: string }> } }>;
    }>();
    assert.equal(doc.openapi, '3.0.3');
    assert.equal(doc.info.title, 'Stratus API Gateway');
    for (const path of [
      '/version',
      '/v0/virtualhosts',
      '/v0/stats',
      '/v0/instances',
      '/v0/routes',
      '/v0/status',
      '/v0/secret',
      '/openapi.json',
    ]) {
      const get = doc.paths[path]?.get;
      assert.ok(get, path);
      assert.ok(get.summary, `${path} summary`);
      assert.ok(get.responses['200']?.description, `${path} 200 description`);
    }
  });

  it('answers /version in plain text on api and gateway hosts', async () => {
    for (const host of ['api.localhost', 'gateway.localhost', '127.0.0.1']) {
      const res = await h.call({ path: '/version', host });
      assert.equal(res.status, 200);
      assert.match(res.text, /^\d+\.\d+\.\d+$/);
    }
  });
});
