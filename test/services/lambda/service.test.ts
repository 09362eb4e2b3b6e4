import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { lambdaServiceWith } from '../../../src/services/lambda/index.ts';
import { run } from '../../../src/store/sql-work.ts';
import { asUser, startTestService, type TestService, jsonCaller } from '../../helpers/service.ts';

describe('lambda service', () => {
  let service: TestService;
  before(async () => {
    // A wall-clock limit long enough for the memory bomb below to reach its 32 MiB on a loaded
    // machine (V8 collects garbage several times before it gives up): it ends as lambda_memory.
    service = await startTestService(lambdaServiceWith({ timeoutMs: 2000, memoryLimitMiB: 32, prewarm: 1 }));
    // Project ownership lives in the apikeys service's table; a minimal copy for the 403 checks.
    await service.store.sql.database.write(function* () {
      yield* run('create table apikeys_project_owners (project_id text not null, user_id text not null)');
      yield* run(`insert into apikeys_project_owners (project_id, user_id) values ('proj-1', 'user-ada')`);
    });
  });
  after(async () => {
    await service.close();
  });

  const ada = asUser('user-ada', {});
  const bob = asUser('user-bob');
  const call = (...args: Parameters<ReturnType<typeof jsonCaller>>) => jsonCaller(service.app)(...args);
  const create = async (body: Record<string, unknown>, headers = ada) => {
    const res = await call('POST', '/api/v0/lambdas', headers, body);
    assert.equal(res.statusCode, 201, res.body);
    return res.json() as { id: string; name: string; path: string; method: string; owner: string };
  };
  const errorCode = (res: LightMyRequestResponse) => (res.json() as { error: { code: string } }).error.code;

  describe('management', () => {
    it('creates with defaults and returns the full object', async () => {
      const res = await call('POST', '/api/v0/lambdas', ada, {
        name: 'hello-world',
        runtime: 'js',
        code: 'export default () => 1',
      });
      assert.equal(res.statusCode, 201);
      const body = res.json();
      assert.match(body.id, /^[0-9a-f-]{36}$/);
      assert.equal(typeof body.created_timestamp, 'number');
      assert.deepEqual(
        { ...body, id: 'x', created_timestamp: 0 },
        {
          id: 'x',
          created_timestamp: 0,
          owner: 'user-ada',
          project_id: '',
          name: 'hello-world',
          language: 'javascript',
          code: 'export default () => 1',
          method: 'ANY',
          path: '/hello-world',
          env: {},
          secrets: [],
          logger_id: null,
          schedule: null,
          schedule_tz: null,
          next_run_at: null,
        },
      );
    });

    it('rejects bad input with 400 and changes nothing', async () => {
      const bad: unknown[] = [
        { code: 'x' },
        { name: 'n' },
        { name: '', code: '' },
        { name: 'n', code: '', language: 'python' },
        { name: 'n', code: '', runtime: 'python' },
        { name: 'n', code: '', runtime: 'js', language: 'static-html' },
        { name: 'n', code: 'export default (', language: 'javascript' },
        { name: 'n', code: 'export default (' },
        { name: 'n', code: '', method: 'GE T' },
        { name: 'n', code: '', path: 'nope' },
        { name: 'n', code: '', extra: 1 },
      ];
      for (const body of bad) {
        const res = await call('POST', '/api/v0/lambdas', bob, body);
        assert.equal(res.statusCode, 400, JSON.stringify(body));
        assert.equal(errorCode(res), 'validation_error');
      }
      const broken = await call('POST', '/api/v0/lambdas', bob, '{nope');
      assert.equal(errorCode(broken), 'invalid_json');
      assert.deepEqual((await call('GET', '/api/v0/lambdas', bob)).json(), []);
    });

    it('needs identity everywhere under /api/v0', async () => {
      for (const [m, u] of [
        ['GET', '/api/v0/lambdas'],
        ['POST', '/api/v0/lambdas'],
        ['GET', '/api/v0/lambdas/x'],
        ['DELETE', '/api/v0/lambdas/x'],
        ['GET', '/api/v0/run/x'],
        ['GET', '/me'],
        ['GET', '/ongoing'],
        ['GET', '/api/v0/me'],
        ['GET', '/api/v0/ongoing'],
        ['GET', '/api/v0/openapi'],
      ] as const) {
        const res = await call(m, u, { 'x-gateway-authentication': 'not json' });
        assert.equal(res.statusCode, 401, `${m} ${u}`);
        assert.equal(errorCode(res), 'unauthorized');
      }
    });

    it('keeps names unique per owner, lists in creation order, hides other owners', async () => {
      await create({ name: 'dup', code: '' }, bob);
      const again = await call('POST', '/api/v0/lambdas', bob, { name: 'dup', code: '' });
      assert.equal(again.statusCode, 409);
      assert.equal(errorCode(again), 'conflict');
      const other = await create({ name: 'dup', code: '' }, asUser('user-carol'));
      await create({ name: 'second', code: '' }, bob);
      assert.deepEqual(
        (await call('GET', '/api/v0/lambdas', bob)).json().map((l: { name: string }) => l.name),
        ['dup', 'second'],
      );
      assert.equal((await call('GET', `/api/v0/lambdas/${other.id}`, bob)).statusCode, 404);
      assert.equal((await call('GET', `/api/v0/lambdas/${other.id}`, asUser('user-carol'))).json().name, 'dup');
    });

    it('patches fields, keeps the rest, and deletes', async () => {
      const l = await create({ name: 'to-patch', code: 'export default () => ({ v: 1 })', method: 'get' });
      assert.equal(l.method, 'GET');
      let res = await call('PATCH', `/api/v0/lambdas/${l.id}`, ada, {
        name: 'hello-updated',
        method: 'post',
        path: '/hello-updated',
        code: 'export default () => ({ v: 2 })',
      });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(
        { ...(res.json() as object), created_timestamp: 0 },
        {
          ...l,
          created_timestamp: 0,
          name: 'hello-updated',
          method: 'POST',
          path: '/hello-updated',
          code: 'export default () => ({ v: 2 })',
          language: 'javascript',
          project_id: '',
        },
      );
      assert.deepEqual((await call('GET', `/run/${l.id}`)).json(), { v: 2 });
      await create({ name: 'taken', code: '' });
      res = await call('PATCH', `/api/v0/lambdas/${l.id}`, ada, { name: 'taken' });
      assert.equal(res.statusCode, 409);
      assert.equal((await call('PATCH', `/api/v0/lambdas/${l.id}`, ada, { owner: 'x' })).statusCode, 400);
      const unparsable = await call('PATCH', `/api/v0/lambdas/${l.id}`, ada, { code: 'export default (' });
      assert.equal(unparsable.statusCode, 400);
      assert.match(unparsable.json().error.message, /does not parse/);
      assert.equal((await call('GET', `/api/v0/lambdas/${l.id}`, ada)).json().code, 'export default () => ({ v: 2 })');
      // Static content is never parsed.
      assert.equal(
        (await call('PATCH', `/api/v0/lambdas/${l.id}`, ada, { language: 'static-html', code: '<p>(' })).statusCode,
        200,
      );
      assert.equal((await call('GET', `/run/${l.id}`)).body, '<p>(');
      assert.equal((await call('PATCH', `/api/v0/lambdas/${l.id}`, bob, { name: 'x' })).statusCode, 404);
      assert.equal((await call('PUT', `/api/v0/lambdas/${l.id}`, ada, {})).statusCode, 405);
      res = await call('DELETE', `/api/v0/lambdas/${l.id}`, ada);
      assert.deepEqual(res.json(), { id: l.id });
      assert.equal((await call('GET', `/api/v0/lambdas/${l.id}`, ada)).statusCode, 404);
      assert.equal((await call('GET', `/run/${l.id}`)).statusCode, 404);
      assert.equal((await call('POST', `/mux/user-ada/hello-updated`)).statusCode, 404);
      assert.equal((await call('DELETE', `/api/v0/lambdas/${l.id}`, ada)).statusCode, 404);
    });
  });

  describe('invocation', () => {
    it('keeps module state between runs only while env and secrets stay the same', async () => {
      const l = await create({
        name: 'stateful',
        code: 'let n = 0; export default (req, ctx) => [++n, ctx.env.MODE]',
        env: { MODE: 'a' },
      });
      assert.deepEqual((await call('GET', `/run/${l.id}`)).json(), [1, 'a']);
      assert.deepEqual((await call('GET', `/run/${l.id}`)).json(), [2, 'a']);
      assert.equal((await call('PATCH', `/api/v0/lambdas/${l.id}`, ada, { env: { MODE: 'b' } })).statusCode, 200);
      assert.deepEqual((await call('GET', `/run/${l.id}`)).json(), [1, 'b']);
      assert.equal(
        (await call('PATCH', `/api/v0/lambdas/${l.id}`, ada, { secrets: { KEY: 'rotated-1' } })).statusCode,
        200,
      );
      assert.deepEqual((await call('GET', `/run/${l.id}`)).json(), [1, 'b']);
      assert.deepEqual((await call('GET', `/run/${l.id}`)).json(), [2, 'b']);
    });

    it('test-runs a lambda for its owner, answering the response and the console lines', async () => {
      const l = await create({
        name: 'talker',
        path: '/talk',
        method: 'POST',
        code: 'export default (req) => { console.log("got", req.body.n, req.query.q); console.error("careful"); return { doubled: req.body.n * 2 } }',
      });
      const res = await call('POST', `/api/v0/lambdas/${l.id}/invoke`, ada, { body: { n: 21 }, query: { q: 'x' } });
      assert.equal(res.statusCode, 200, res.body);
      const out = res.json<{
        status: number;
        headers: Record<string, string>;
        body: string;
        logs: { level: string; message: string }[];
        duration_ms: number;
      }>();
      assert.equal(out.status, 200);
      assert.equal(out.headers['content-type'], 'application/json; charset=utf-8');
      assert.deepEqual(JSON.parse(out.body), { doubled: 42 });
      assert.deepEqual(out.logs, [
        { level: 'log', message: 'got 21 x' },
        { level: 'error', message: 'careful' },
      ]);
      assert.ok(out.duration_ms >= 0);
      const failing = await create({
        name: 'failing',
        code: 'export default () => { console.log("before"); throw new Error("kaput") }',
      });
      const failed = (await call('POST', `/api/v0/lambdas/${failing.id}/invoke`, ada, {})).json<{
        status: number;
        body: string;
        logs: unknown[];
      }>();
      assert.equal(failed.status, 500);
      assert.deepEqual(JSON.parse(failed.body), { error: { status: 500, code: 'lambda_error', message: 'kaput' } });
      assert.deepEqual(failed.logs, [{ level: 'log', message: 'before' }]);
      // Owners only; the body is checked.
      assert.equal((await call('POST', `/api/v0/lambdas/${l.id}/invoke`, bob, {})).statusCode, 404);
      assert.equal((await call('POST', `/api/v0/lambdas/${l.id}/invoke`, {}, {})).statusCode, 401);
      assert.equal(
        errorCode(await call('POST', `/api/v0/lambdas/${l.id}/invoke`, ada, { nope: 1 })),
        'validation_error',
      );
      assert.equal(
        errorCode(await call('POST', `/api/v0/lambdas/${l.id}/invoke`, ada, { path: 'no-slash' })),
        'validation_error',
      );
    });

    it('runs the documented hello-world through /run, /api/v0/run and the mux', async () => {
      const l = await create(
        {
          name: 'hw',
          path: '/hello-world',
          method: 'GET',
          code: 'export default (req) => ({ body: { message: "Hello, World!", method: req.method, path: req.path } })',
        },
        asUser('user-hw'),
      );
      const expected = { body: { message: 'Hello, World!', method: 'GET', path: '/hello-world' } };
      const run = await call('GET', `/run/${l.id}?x=1`);
      assert.equal(run.statusCode, 200);
      assert.equal(run.headers['content-type'], 'application/json; charset=utf-8');
      assert.deepEqual(run.json(), expected);
      assert.deepEqual((await call('GET', `/api/v0/run/${l.id}`, asUser('user-hw'))).json(), expected);
      assert.equal((await call('GET', `/api/v0/run/${l.id}`, bob)).statusCode, 404);
      assert.deepEqual((await call('GET', '/mux/user-hw/hello-world?q=1')).json(), expected);
      assert.equal((await call('GET', '/mux/user-hw/hello-world/')).json().body.path, '/hello-world/');
      assert.equal((await call('POST', '/mux/user-hw/hello-world')).statusCode, 404);
      assert.equal((await call('DELETE', `/run/${l.id}`)).json().body.method, 'DELETE');
      assert.equal((await call('GET', '/mux/nobody/hello-world')).statusCode, 404);
    });

    it('runs the documented webhook with a JSON body and rejects bad JSON', async () => {
      const l = await create({
        name: 'webhook',
        code: 'export default (req) => ({ body: { processed: true, event: req.body.event } })',
      });
      const res = await call('POST', `/run/${l.id}`, {}, { event: 'payment_received', amount: 49.99, currency: 'USD' });
      assert.deepEqual(res.json(), { body: { processed: true, event: 'payment_received' } });
      const bad = await call('POST', `/run/${l.id}`, {}, '{oops');
      assert.equal(bad.statusCode, 400);
      assert.equal(errorCode(bad), 'invalid_json');
    });

    it('maps query, headers and text bodies into req', async () => {
      const l = await create({
        name: 'echo',
        code: 'export default (req) => ({ q: req.query, h: req.headers["x-thing"], b: req.body, p: req.path })',
      });
      const res = await service.app.inject({
        method: 'PUT',
        url: `/run/${l.id}?a=1&a=2&b=3`,
        headers: { 'x-thing': 'yes', 'content-type': 'text/plain' },
        payload: 'hi',
      });
      assert.deepEqual(res.json(), { q: { a: ['1', '2'], b: '3' }, h: 'yes', b: 'hi', p: '/echo' });
    });

    it('serves write() text, Responses and static languages', async () => {
      const w = await create({ name: 'writer', code: 'write("Hello from Lambda")' });
      let res = await call('GET', `/run/${w.id}`);
      assert.equal(res.body, 'Hello from Lambda');
      assert.equal(res.headers['content-type'], 'text/plain; charset=utf-8');
      const r = await create({
        name: 'resp',
        code: 'export default () => new Response("<b>x</b>", { status: 202, headers: { "content-type": "text/html" } })',
      });
      res = await call('GET', `/run/${r.id}`);
      assert.equal(res.statusCode, 202);
      assert.equal(res.headers['content-type'], 'text/html');
      assert.equal(res.body, '<b>x</b>');
      await create({
        name: 'css',
        language: 'static-css',
        method: 'GET',
        path: '/site.css',
        code: 'body { color: #111; }',
      });
      res = await call('GET', '/mux/user-ada/site.css');
      assert.equal(res.body, 'body { color: #111; }');
      assert.equal(res.headers['content-type'], 'text/css; charset=utf-8');
      const h = await create({ name: 'page', language: 'static-html', code: '<h1>x</h1>' });
      assert.equal((await call('GET', `/run/${h.id}`)).headers['content-type'], 'text/html; charset=utf-8');
      const j = await create({ name: 'js', language: 'static-js', code: 'alert(1)' });
      assert.equal((await call('GET', `/run/${j.id}`)).headers['content-type'], 'text/javascript; charset=utf-8');
    });

    it('prefers an exact method over ANY in the mux and matches the root path', async () => {
      await create({ name: 'any', method: 'ANY', path: '/r', code: '"any"' }, asUser('user-mux'));
      await create({ name: 'post', method: 'POST', path: '/r/', code: '"post"' }, asUser('user-mux'));
      await create({ name: 'root', method: 'GET', path: '/', code: '"root"' }, asUser('user-mux'));
      assert.equal((await call('POST', '/mux/user-mux/r')).json(), 'post');
      assert.equal((await call('GET', '/mux/user-mux/r/')).json(), 'any');
      assert.equal((await call('GET', '/mux/user-mux')).json(), 'root');
      assert.equal((await call('GET', '/mux/user-mux/')).json(), 'root');
    });

    it('answers failures with the envelope while other requests keep being served', async () => {
      const thrower = await create({ name: 'thrower', code: 'export default () => { throw new Error("kaput") }' });
      let res = await call('GET', `/run/${thrower.id}`);
      assert.equal(res.statusCode, 500);
      assert.deepEqual(res.json(), { error: { status: 500, code: 'lambda_error', message: 'kaput' } });
      const loop = await create({ name: 'loop', code: 'while (true) {}' });
      const bomb = await create({
        name: 'bomb',
        code: 'const a = []; while (true) a.push(new Array(1000000).fill(1))',
      });
      const hello = await create({ name: 'quick', code: '"quick"' });
      let loopEnded = false;
      const running = call('GET', `/run/${loop.id}`).finally(() => (loopEnded = true));
      // While the loop runs: another lambda and /ongoing answer promptly.
      await new Promise((r) => setTimeout(r, 50));
      assert.equal((await call('GET', `/run/${hello.id}`)).json(), 'quick');
      const ongoing = (await call('GET', '/ongoing', ada)).json();
      assert.equal(ongoing.length, 1);
      assert.deepEqual(
        { ...ongoing[0], id: 'x', started_at: 'x' },
        { id: 'x', lambda_id: loop.id, lambda_name: 'loop', started_at: 'x', method: 'GET', path: '/loop' },
      );
      assert.deepEqual((await call('GET', '/api/v0/ongoing', bob)).json(), []);
      assert.equal(loopEnded, false, 'the other answers came while the runaway lambda still ran');
      res = await running;
      assert.equal(res.statusCode, 500);
      assert.equal(errorCode(res), 'lambda_timeout');
      res = await call('GET', `/run/${bomb.id}`);
      assert.equal(errorCode(res), 'lambda_memory');
      assert.equal((await call('GET', `/run/${hello.id}`)).json(), 'quick');
    });

    it('answers HEAD with GET lambdas, 413 for huge bodies and 404 for unknown paths', async () => {
      const l = await create({ name: 'head', method: 'GET', path: '/h', code: '"h"' }, asUser('user-head'));
      assert.equal((await call('HEAD', '/mux/user-head/h')).statusCode, 200);
      const big = await service.app.inject({
        method: 'POST',
        url: `/run/${l.id}`,
        headers: { 'content-type': 'text/plain' },
        payload: 'x'.repeat(10 * 1024 * 1024 + 1),
      });
      assert.equal(big.statusCode, 413);
      assert.equal(errorCode(big), 'payload_too_large');
      const nowhere = await call('GET', '/nowhere');
      assert.equal(nowhere.statusCode, 404);
      assert.equal(errorCode(nowhere), 'not_found');
    });

    it('makes escape attempts fail', async () => {
      for (const code of [
        'this.constructor.constructor("return process")()',
        'export default async () => (await import("fs")).readFileSync("/etc/passwd", "utf8")',
        'globalThis.require("fs")',
      ]) {
        const l = await create({ name: `escape-${code.length}`, code });
        const res = await call('GET', `/run/${l.id}`);
        assert.equal(res.statusCode, 500, code);
        assert.equal(errorCode(res), 'lambda_error');
      }
    });
  });

  describe('project hosts', () => {
    const onProject = (headers: Record<string, string>) => ({ ...headers, 'x-project-id': 'proj-1' });

    it('creates in the project for owners only, and scopes list, run and the mux', async () => {
      const denied = await call('POST', '/api/v0/lambdas', onProject(bob), { name: 'site', code: '' });
      assert.equal(denied.statusCode, 403);
      assert.equal(errorCode(denied), 'forbidden');
      const site = await create(
        { name: 'site', language: 'static-html', method: 'GET', path: '/', code: '<h1>Home</h1>' },
        onProject(ada),
      );
      const api = await create(
        {
          name: 'p-api',
          method: 'POST',
          path: '/api/echo',
          code: 'export default (req) => ({ got: req.body, path: req.path })',
        },
        onProject(ada),
      );
      assert.equal((await call('GET', `/api/v0/lambdas/${site.id}`, ada)).json().project_id, 'proj-1');
      assert.deepEqual(
        (await call('GET', '/api/v0/lambdas', onProject(ada))).json().map((l: { name: string }) => l.name),
        ['site', 'p-api'],
      );
      let res = await call('GET', '/', onProject({}));
      assert.equal(res.body, '<h1>Home</h1>');
      assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
      res = await call('POST', '/api/echo?x=1', onProject({}), { a: 1 });
      assert.deepEqual(res.json(), { got: { a: 1 }, path: '/api/echo' });
      assert.equal(errorCode(await call('POST', '/api/echo', onProject({}), '{bad')), 'invalid_json');
      assert.equal((await call('GET', '/me', onProject(ada))).statusCode, 404);
      assert.equal((await call('GET', `/run/${api.id}`, onProject({}))).statusCode, 200);
      const outside = await create({ name: 'outside', code: '1' });
      assert.equal((await call('GET', `/run/${outside.id}`, onProject({}))).statusCode, 404);
    });
  });

  describe('account', () => {
    it('answers /me from the identity', async () => {
      const headers = asUser('user-me', { user: { id: 'user-me', email: 'ada@example.com', nick: 'ada' } });
      assert.deepEqual((await call('GET', '/me', headers)).json(), {
        id: 'user-me',
        email: 'ada@example.com',
        nick: 'ada',
      });
      assert.deepEqual((await call('GET', '/api/v0/me', headers)).json(), {
        id: 'user-me',
        email: 'ada@example.com',
        nick: 'ada',
      });
    });

    it('serves the OpenAPI 3.0.3 document publicly and at the alias with identity', async () => {
      const doc = (await call('GET', '/openapi')).json();
      assert.equal(doc.openapi, '3.0.3');
      assert.deepEqual(doc.info.title, 'Lambda API');
      assert.equal(doc.info.version, '1.0.0');
      for (const p of [
        '/api/v0/lambdas',
        '/api/v0/lambdas/{lambda_id}',
        '/run/{lambda_id}',
        '/api/v0/run/{lambda_id}',
        '/mux/{owner_id}/{path}',
        '/me',
        '/ongoing',
      ]) {
        assert.ok(doc.paths[p], p);
      }
      assert.equal(doc.paths['/api/v0/lambdas'].get.summary, 'List lambdas');
      assert.deepEqual((await call('GET', '/api/v0/openapi', ada)).json(), doc);
      assert.deepEqual((await call('GET', '/openapi.json')).json(), doc, 'also at /openapi.json');
    });
  });
});
