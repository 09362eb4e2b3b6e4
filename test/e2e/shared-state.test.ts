import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createTestDatabase, testDialect, type TestDatabase } from '../helpers/database.ts';
import { request, type HttpResponse } from '../helpers/http.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';

/**
 * README "What instances share": two `stratus serve` processes on one PostgreSQL schema, each
 * asked in turn, must agree — the credential throttle, the running lambda invocations, a lambda's
 * code after an update, a registry upload continued on the other instance, and a document
 * collection's definition after a drop or a new index.
 */
const identity = (id: string) => ({ 'x-gateway-authentication': JSON.stringify({ user: { id } }) });
const json = { 'content-type': 'application/json' };

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe(
  'shared state: two server processes on one PostgreSQL database',
  { skip: testDialect !== 'postgres' && 'instances share state only through a PostgreSQL database' },
  () => {
    let database: TestDatabase;
    let a: ServedProcess;
    let b: ServedProcess;
    const services = ['--services', 'apikeys,auth,config,lambda,run,docdb'];

    before(async () => {
      database = await createTestDatabase();
      const env = { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl };
      [a, b] = await Promise.all([
        serve(services, env),
        serve(services, { ...env, DATA_DIR: `${database.dataDir}-b` }),
      ]);
    });
    after(async () => {
      await a?.stop();
      await b?.stop();
      await database?.cleanup();
    });

    const internal = (
      server: ServedProcess,
      host: string,
      method: string,
      path: string,
      user: string,
      body?: unknown,
      headers: Record<string, string> = {},
    ): Promise<HttpResponse> =>
      request(server.internalPort, {
        method,
        path,
        host,
        headers: { ...identity(user), ...(body === undefined ? {} : json), ...headers },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      });

    it('never answers a config object from a stale cache after a write on the other instance', async () => {
      const config = (server: ServedProcess, method: string, path: string, body?: unknown) =>
        request(server.publicPort, {
          method,
          path,
          host: 'config.localhost',
          headers: json,
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      assert.equal((await config(a, 'POST', '/v0/configs', { id: 'cached', entries: { n: 0 } })).status, 201);
      for (let n = 1; n <= 30; n++) {
        // Read on A (now cached there), write on B, read on A again at once: the new value.
        assert.equal((await config(a, 'GET', '/v0/configs/cached')).status, 200);
        const writer = n % 2 === 0 ? a : b;
        assert.equal((await config(writer, 'PATCH', '/v0/configs/cached', { n })).status, 200);
        for (const reader of [a, b]) {
          const read = await config(reader, 'GET', '/v0/configs/cached');
          assert.deepEqual(read.json(), { id: 'cached', entries: { n } }, `after write ${n}`);
        }
      }
      assert.equal((await config(b, 'DELETE', '/v0/configs/cached')).status, 204);
      assert.equal((await config(a, 'GET', '/v0/configs/cached')).status, 404);
    });

    it('routes a project host made or deleted through the other instance at once', async () => {
      const site = (server: ServedProcess) => request(server.publicPort, { path: '/', host: 'site-shared.localhost' });
      const code = async (server: ServedProcess) => (await site(server)).json<{ error: { code: string } }>().error.code;
      // B caches that the host names no project.
      assert.equal(await code(b), 'no_route');
      const made = await internal(a, 'apikeys.localhost', 'POST', '/v0/projects', 'user-site', {
        name: 'Site',
        slug: 'site-shared',
      });
      assert.equal(made.status, 201, made.text);
      // The project exists everywhere: its host reaches the lambda service, which has no lambda for '/'.
      assert.notEqual(await code(b), 'no_route');
      const id = made.json<{ id: string }>().id;
      assert.equal((await internal(a, 'apikeys.localhost', 'DELETE', `/v0/projects/${id}`, 'user-site')).status, 200);
      assert.equal(await code(b), 'no_route');
    });

    it('counts failed API-key checks on every instance: guesses spread over both are refused on both', async () => {
      const created = await internal(a, 'apikeys.localhost', 'POST', '/v0/apikeys', 'user-guard', { name: 'target' });
      assert.equal(created.status, 201, created.text);
      const { key, secret } = created.json<{ key: string; secret: string }>();
      const attempt = (server: ServedProcess, guess: string) =>
        request(server.publicPort, {
          path: '/v1/config',
          host: 'config.localhost',
          headers: { 'api-key': key, 'api-secret': guess },
        });
      // The default limit is 20 failures of one key per minute: ten through each instance.
      const statuses: number[] = [];
      for (let i = 0; i < 10; i++) {
        statuses.push((await attempt(a, `wrong-a-${i}`)).status);
        statuses.push((await attempt(b, `wrong-b-${i}`)).status);
      }
      assert.deepEqual(new Set(statuses), new Set([401]));
      for (const server of [a, b]) {
        const limited = await attempt(server, `wrong-again`);
        assert.equal(limited.status, 429, 'the key is limited on both instances');
        assert.ok(Number(limited.headers['retry-after']) >= 1);
        assert.ok(!limited.text.includes(secret));
      }
      assert.equal((await attempt(b, secret)).status, 429, 'even the right secret waits for the window');
    });

    it('lists an invocation running on one instance in /ongoing of the other, until it ends', async () => {
      const user = 'user-ongoing';
      const code = "const t = Date.now(); while (Date.now() - t < 2500) {} 'slow'";
      const created = await internal(a, 'lambda.localhost', 'POST', '/api/v0/lambdas', user, { name: 'slow', code });
      assert.equal(created.status, 201, created.text);
      const lambda = created.json<{ id: string }>();
      const running = internal(a, 'lambda.localhost', 'GET', `/run/${lambda.id}`, user);
      type Item = { id: string; lambda_id: string; lambda_name: string; method: string; path: string };
      let seen: Item[] = [];
      await waitUntil(async () => {
        seen = (await internal(b, 'lambda.localhost', 'GET', '/api/v0/ongoing', user)).json<Item[]>();
        return seen.length === 1;
      }, 2_000);
      assert.deepEqual(
        { ...seen[0], id: 'x', started_at: 'x' },
        { id: 'x', lambda_id: lambda.id, lambda_name: 'slow', started_at: 'x', method: 'GET', path: '/slow' },
      );
      const mine = (await internal(a, 'lambda.localhost', 'GET', '/ongoing', user)).json<Item[]>();
      assert.deepEqual(
        mine.map((item) => item.id),
        [seen[0]!.id],
        'one invocation, the same on both instances',
      );
      assert.deepEqual(
        (await internal(b, 'lambda.localhost', 'GET', '/ongoing', 'user-other')).json(),
        [],
        "another owner's list stays empty",
      );
      const done = await running;
      assert.equal(done.status, 200, done.text);
      assert.equal(done.json(), 'slow');
      await waitUntil(
        async () => (await internal(b, 'lambda.localhost', 'GET', '/ongoing', user)).json<Item[]>().length === 0,
        2_000,
      );
    });

    it('runs the new code on every instance at once after an update on one of them', async () => {
      const user = 'user-update';
      const created = await internal(a, 'lambda.localhost', 'POST', '/api/v0/lambdas', user, {
        name: 'versioned',
        code: "export default () => 'v1'",
      });
      assert.equal(created.status, 201, created.text);
      const { id } = created.json<{ id: string }>();
      // Warm both instances: compiled code and the module's context are cached on each.
      for (const server of [a, b])
        assert.equal((await internal(server, 'lambda.localhost', 'GET', `/run/${id}`, user)).json(), 'v1');
      const patched = await internal(b, 'lambda.localhost', 'PATCH', `/api/v0/lambdas/${id}`, user, {
        code: "export default () => 'v2'",
      });
      assert.equal(patched.status, 200, patched.text);
      // No wait: each invocation reads the lambda's row, and the caches are keyed by its code.
      for (const server of [a, b])
        assert.equal((await internal(server, 'lambda.localhost', 'GET', `/run/${id}`, user)).json(), 'v2');
    });

    it('finishes a registry upload whose chunks went to both instances', async () => {
      const user = 'user-registry';
      const name = 'shared/app';
      const octet = { 'content-type': 'application/octet-stream' };
      const chunks = ['first chunk;', 'second chunk;', 'third chunk;', 'fourth chunk;', 'last'];
      const digest = `sha256:${createHash('sha256').update(chunks.join('')).digest('hex')}`;
      const started = await internal(a, 'run.localhost', 'POST', `/v2/${name}/blobs/uploads/`, user);
      assert.equal(started.status, 202, started.text);
      const location = String(started.headers.location);
      // A, A (A follows the upload from its second chunk), B, A (A's follower no longer matches).
      let offset = 0;
      for (const [i, server] of [a, a, b, a].entries()) {
        const chunk = chunks[i]!;
        const patched = await internal(server, 'run.localhost', 'PATCH', location, user, chunk, octet);
        assert.equal(patched.status, 202, patched.text);
        offset += Buffer.byteLength(chunk);
        assert.equal(patched.headers.range, `0-${offset - 1}`);
      }
      const finished = await internal(
        a,
        'run.localhost',
        'PUT',
        `${location}?digest=${digest}`,
        user,
        chunks[4],
        octet,
      );
      assert.equal(finished.status, 201, finished.text);
      assert.equal(finished.headers['docker-content-digest'], digest);
      for (const server of [a, b]) {
        const present = await internal(server, 'run.localhost', 'HEAD', `/v2/${name}/blobs/${digest}`, user);
        assert.equal(present.status, 200);
        assert.equal(present.headers['content-length'], String(Buffer.byteLength(chunks.join(''))));
      }
      const gone = await internal(b, 'run.localhost', 'PATCH', location, user, 'more', octet);
      assert.equal(gone.status, 404, 'a finished upload is finished on every instance');
    });

    it("sees a collection's new index, dropped index and drop made on the other instance", async () => {
      const user = 'user-docdb';
      const host = 'docdb.localhost';
      const created = await internal(a, host, 'POST', '/v1/databases', user, { name: 'shared' });
      assert.equal(created.status, 201, created.text);
      const C = `/v1/databases/${created.json<{ id: string }>().id}/collections/docs`;
      const inserted = await internal(
        a,
        host,
        'POST',
        `${C}:insert`,
        user,
        '{"id":"d1","email":"ada@example.com"}\n{"id":"d2","email":"bob@example.com"}\n',
      );
      assert.equal(inserted.status, 201, inserted.text);
      const find = async (server: ServedProcess, body: unknown) => {
        const res = await internal(server, host, 'POST', `${C}:find`, user, body);
        return { status: res.status, text: res.text };
      };
      // B caches the collection's definition (no indexes yet).
      assert.equal((await find(b, { limit: -1 })).status, 200);
      const byEmail = { index: 'by-email', value: 'bob@example.com' };
      assert.equal((await find(b, byEmail)).status, 404, 'no such index yet');
      const index = await internal(a, host, 'POST', `${C}:createIndex`, user, {
        name: 'by-email',
        type: 'map',
        field: 'email',
      });
      assert.equal(index.status, 201, index.text);
      // At once: B's cached definition counts only after a notifier fence (README: What instances share).
      const found = await find(b, byEmail);
      assert.equal(found.status, 200, found.text);
      assert.equal(JSON.parse(found.text).id, 'd2');
      assert.equal((await internal(a, host, 'POST', `${C}:dropIndex`, user, { name: 'by-email' })).status, 204);
      assert.equal((await find(b, byEmail)).status, 404);
      assert.equal((await internal(a, host, 'POST', `${C}:dropCollection`, user)).status, 204);
      assert.equal((await find(b, { limit: -1 })).status, 404);
      const again = await internal(b, host, 'POST', `${C}:insert`, user, '{"id":"d3"}\n');
      assert.equal(again.status, 201, 'an insert through B creates the collection anew');
      assert.deepEqual(
        (await find(a, { limit: -1 })).text
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => (JSON.parse(line) as { id: string }).id),
        ['d3'],
      );
    });
  },
);
