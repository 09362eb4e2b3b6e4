import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createSession, createUser } from '../../src/services/auth/repository.ts';
import type { HttpResponse } from '../helpers/http.ts';
import { startTestPlatform, storeDigest, type TestPlatform } from '../helpers/platform.ts';

// Issue 16: bodies nested 10,000 levels and absurd page numbers, sent through the public port to
// every JSON route of every service's OpenAPI document (and the raw-body JSON routes beside them),
// answer 4xx and leave the store exactly as it was.

const DEPTH = 10_000;
const deepObject = '{"a":'.repeat(DEPTH) + '1' + '}'.repeat(DEPTH);
const deepArray = '['.repeat(DEPTH) + ']'.repeat(DEPTH);
const HOSTILE_BODIES: [string, string][] = [
  ['10,000 nested objects', deepObject],
  ['10,000 nested arrays', deepArray],
  ['a deep value inside a plausible body', `{"name":"x","id":"x","value":${deepObject},"payload":${deepObject}}`],
];
const ABSURD_NUMBERS = ['-1', '0', '1e309', '1e20', 'NaN', '0x10', '1.5', '99999999999999999999', 'Infinity', ' 1', ''];
const SCHEDULER_KEY = 'hostile-scheduler-key';
const SERVICES = [
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
  'gateway',
] as const;

interface Operation {
  service: string;
  method: string;
  path: string;
  json: boolean;
  integerQuery: string[];
}

type OpenApiDocument = {
  paths: Record<
    string,
    Record<
      string,
      {
        requestBody?: { content?: Record<string, unknown> };
        parameters?: { in: string; name: string; schema?: { type?: string } }[];
      }
    >
  >;
};

describe('hostile input: deep JSON and absurd pagination answer 4xx and change nothing', () => {
  let t: TestPlatform;
  let auth: Record<string, string>;
  const params: Record<string, string> = { provider: 'none', task: 't1' };
  const ids: Record<string, Record<string, string>> = {};
  let operations: Operation[] = [];

  const publicCall = (
    service: string,
    method: string,
    path: string,
    body?: string,
    headers: Record<string, string> = {},
  ) =>
    t.call({
      method,
      host: `${service}.localhost`,
      path,
      headers: { ...auth, 'x-api-key': SCHEDULER_KEY, 'content-type': 'application/json', ...headers },
      ...(body === undefined ? {} : { body }),
    });
  const created = async (response: Promise<HttpResponse>): Promise<Record<string, string>> => {
    const res = await response;
    assert.ok(res.status >= 200 && res.status < 300, `fixture: ${res.status} ${res.text}`);
    return res.json();
  };
  const fill = (service: string, path: string) =>
    path.replace(/\{([^}]+)\}/g, (_all, name: string) => ids[service]?.[name] ?? params[name] ?? 'x');
  const kvState = async () => {
    const collections = (await publicCall('kv', 'GET', '/v1/collections')).text;
    const keys = (await publicCall('kv', 'GET', '/v1/collections/hostile/keys')).text;
    return { collections, keys };
  };
  const assertRefused = (res: HttpResponse, what: string) => {
    assert.ok(
      res.status >= 400 && res.status < 500,
      `${what}: expected a 4xx, got ${res.status} ${res.text.slice(0, 200)}`,
    );
  };

  before(async () => {
    t = await startTestPlatform({ schedulerApiKeys: [SCHEDULER_KEY] });
    const sql = t.platform.store.sql;
    const user = await createUser(sql, { email: 'hostile@example.com', password: 'correct horse battery' });
    auth = { authorization: `Bearer ${(await createSession(sql, user.id)).token}` };

    // One of each resource, so that routes with ids reach their body handling.
    const lambda = await created(
      publicCall(
        'lambda',
        'POST',
        '/api/v0/lambdas',
        JSON.stringify({ name: 'echo', code: 'export default (req) => ({ body: req.body })' }),
      ),
    );
    ids.lambda = { lambda_id: lambda.id! };
    await created(publicCall('scheduler', 'POST', '/schedulers', JSON.stringify({ id: 's1', display_name: 'S1' })));
    await created(
      publicCall('scheduler', 'POST', '/schedulers/s1/tasks', JSON.stringify({ id: 't1', payload: { n: 1 } })),
    );
    ids.scheduler = { id: 's1' };
    const database = await created(publicCall('docdb', 'POST', '/v1/databases', JSON.stringify({ name: 'hostile' })));
    await created(
      publicCall('docdb', 'POST', `/v1/databases/${database.id}/collections`, JSON.stringify({ name: 'c' })),
    );
    ids.docdb = { databaseId: database.id!, collection: 'c' };
    const logger = await created(publicCall('logs', 'POST', '/v1/loggers', JSON.stringify({ name: 'hostile' })));
    ids.logs = { id: logger.id! };
    const config = await created(
      publicCall('config', 'POST', '/v0/configs', JSON.stringify({ id: 'hostile', entries: { a: 1 } })),
    );
    ids.config = { id: config.id! };
    await created(publicCall('kv', 'POST', '/v1/collections', JSON.stringify({ name: 'hostile' })));
    await created(
      publicCall('kv', 'POST', '/v1/collections/hostile/keys/k', JSON.stringify({ value: { kept: true } })),
    );

    for (const service of SERVICES) {
      const res = await t.call({
        host: `${service}.localhost`,
        path: service === 'lambda' ? '/openapi' : '/openapi.json',
      });
      assert.equal(res.status, 200, `${service} serves its OpenAPI document`);
      for (const [path, item] of Object.entries(res.json<OpenApiDocument>().paths)) {
        for (const [method, op] of Object.entries(item)) {
          if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
          const json = Object.keys(op.requestBody?.content ?? {}).some((type) => type.includes('json'));
          const integerQuery = (op.parameters ?? [])
            .filter((p) => p.in === 'query' && p.schema?.type === 'integer')
            .map((p) => p.name);
          if (json || integerQuery.length > 0)
            operations.push({ service, method: method.toUpperCase(), path, json, integerQuery });
        }
      }
    }
    // JSON routes whose bodies the services read themselves (not declared as JSON in the documents).
    operations.push(
      { service: 'kv', method: 'POST', path: '/v1/collections', json: true, integerQuery: [] },
      { service: 'kv', method: 'POST', path: '/v1/collections/hostile/keys/k', json: true, integerQuery: [] },
      { service: 'kv', method: 'PUT', path: '/v1/collections/hostile/keys/k', json: true, integerQuery: [] },
      { service: 'lambda', method: 'POST', path: '/run/{lambda_id}', json: true, integerQuery: [] },
      { service: 'lambda', method: 'POST', path: '/api/v0/run/{lambda_id}', json: true, integerQuery: [] },
      { service: 'logs', method: 'POST', path: '/v1/loggers/{id}/ingest/events', json: true, integerQuery: [] },
      { service: 'run', method: 'PUT', path: '/v2/hostile/app/manifests/v1', json: true, integerQuery: [] },
    );
    operations = operations.filter((op) => !(op.service === 'auth' && op.path.startsWith('/v0/sso')));
  });

  after(async () => {
    await t.close();
  });

  it('found the JSON routes of every service', () => {
    const services = new Set(operations.filter((op) => op.json).map((op) => op.service));
    for (const service of ['auth', 'apikeys', 'lambda', 'scheduler', 'docdb', 'logs', 'files', 'config', 'run', 'kv'])
      assert.ok(services.has(service), `${service} has JSON routes`);
    assert.ok(operations.filter((op) => op.json).length >= 40, `${operations.length} operations`);
  });

  it('answers every deeply nested body with a 4xx and stores nothing', async () => {
    // A refused document still takes a number from the collection's counter (docdb.md §10).
    const digest = () => storeDigest(t.platform.store.sql, { columns: ['auto_counter'] });
    const before = await digest();
    const kvBefore = await kvState();
    for (const op of operations.filter((o) => o.json)) {
      for (const [name, body] of HOSTILE_BODIES) {
        const res = await publicCall(
          op.service,
          op.method,
          fill(op.service, op.path),
          body,
          op.service === 'run' ? { 'content-type': 'application/vnd.oci.image.manifest.v1+json' } : {},
        );
        const what = `${op.method} ${op.service}.localhost${op.path} with ${name}`;
        if (/:insert(Stream|Fullduplex)$/.test(op.path)) {
          // These answer per document as they go (docdb.md §8): the refusal is the document's line.
          assert.ok(res.status < 500, `${what}: ${res.status}`);
          assert.ok(res.text.length > 0 && !/^\{"(_id|id)"/m.test(res.text), `${what}: ${res.text.slice(0, 200)}`);
          continue;
        }
        assertRefused(res, what);
        if (res.status === 400 && res.headers['content-type']?.includes('json') && op.service !== 'run') {
          assert.match(
            res.json<{ error: { code: string } }>().error.code,
            /^(invalid_json|validation_error|invalid_request|bad_request)$/,
            `${op.method} ${op.path}: ${res.text.slice(0, 200)}`,
          );
        }
      }
    }
    assert.deepEqual(await digest(), before, 'no table changed');
    assert.deepEqual(await kvState(), kvBefore, 'the key-value node is unchanged');
    const version = await t.call({ host: 'gateway.localhost', path: '/version' });
    assert.equal(version.status, 200, 'the server still answers');
  });

  it('answers absurd page numbers and sizes with 400 validation_error on every paginated list', async () => {
    const lists = operations.filter((op) => op.integerQuery.length > 0);
    assert.ok(
      lists.some((op) => op.path === '/schedulers/{id}/tasks'),
      'the scheduler task list is among them',
    );
    for (const op of lists) {
      for (const name of op.integerQuery) {
        for (const value of ABSURD_NUMBERS) {
          const res = await publicCall(
            op.service,
            op.method,
            `${fill(op.service, op.path)}?${name}=${encodeURIComponent(value)}`,
          );
          assert.equal(res.status, 400, `${op.path}?${name}=${value}: ${res.status} ${res.text.slice(0, 200)}`);
          assert.equal(res.json<{ error: { code: string } }>().error.code, 'validation_error');
        }
      }
    }
    // The key-value node's list reads `limit` itself.
    for (const value of ABSURD_NUMBERS) {
      const res = await publicCall('kv', 'GET', `/v1/collections/hostile/keys?limit=${encodeURIComponent(value)}`);
      assert.equal(res.status, 400, `kv limit=${value}: ${res.text}`);
    }
    // In range, the same lists still answer.
    const ok = await publicCall(
      'scheduler',
      'GET',
      '/schedulers/s1/tasks?scheduled_page=2&scheduled_per_page=500&inflight_page=9007199254740991',
    );
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json<{ scheduled: unknown[]; inflight_meta: { page: number } }>().scheduled, []);
  });

  it('answers docdb find, patch and remove with non-integer skip or limit with 400, and takes huge integers as "more than all"', async () => {
    const { databaseId, collection } = ids.docdb!;
    const base = `/v1/databases/${databaseId}/collections/${collection}`;
    await publicCall('docdb', 'POST', `${base}:insert`, '{"_id":"a","n":1}\n{"_id":"b","n":2}\n');
    const before = await storeDigest(t.platform.store.sql);
    for (const action of ['find', 'patch', 'remove']) {
      for (const field of ['skip', 'limit']) {
        for (const value of ['1e309', '-1e309', '1.5', '"10"', 'null1', '0x10']) {
          const body = `{"${field}":${value}${action === 'patch' ? ',"patch":{"x":1}' : ''}}`;
          const res = await publicCall('docdb', 'POST', `${base}:${action}`, body);
          assert.equal(res.status, 400, `${action} ${body}: ${res.status} ${res.text}`);
        }
      }
    }
    assert.deepEqual(await storeDigest(t.platform.store.sql), before, 'no document changed');
    // Integers of any size are integers (docdb.md §9.1): a limit past the collection returns all,
    // a skip past it returns none, on both stores.
    for (const huge of ['1e20', '99999999999999999999', '123456789012345678901234567890']) {
      const all = await publicCall('docdb', 'POST', `${base}:find`, `{"limit":${huge}}`);
      assert.equal(all.status, 200, all.text);
      assert.equal(all.text.trim().split('\n').length, 2, `limit ${huge}`);
      const none = await publicCall('docdb', 'POST', `${base}:find`, `{"skip":${huge},"limit":${huge}}`);
      assert.equal(none.status, 200, none.text);
      assert.equal(none.text, '', `skip ${huge}`);
    }
    const all = await publicCall('docdb', 'POST', `${base}:find`, '{"limit":-1,"skip":-1e20}');
    assert.equal(all.status, 200);
    assert.equal(all.text.trim().split('\n').length, 2, 'negative limit: no limit; negative skip: none');
  });

  it('keeps values nested as deep as allowed working (1,000 levels inside a kv value and a task payload)', async () => {
    const allowed = '{"a":'.repeat(1000) + '1' + '}'.repeat(1000);
    const set = await publicCall('kv', 'POST', '/v1/collections/hostile/keys/deep', `{"value":${allowed}}`);
    assert.equal(set.status, 200, set.text);
    const got = await publicCall('kv', 'GET', '/v1/collections/hostile/keys/deep');
    assert.equal(got.status, 200);
    assert.equal(JSON.stringify(got.json<{ value: unknown }>().value), allowed);
    const enqueued = await publicCall('scheduler', 'POST', '/schedulers/s1/tasks', `{"payload":${allowed}}`);
    assert.equal(enqueued.status, 202, enqueued.text);
    const tooDeep = await publicCall('kv', 'POST', '/v1/collections/hostile/keys/deeper', `{"value":{"b":${allowed}}}`);
    assert.equal(tooDeep.status, 400);
    assert.equal(tooDeep.json<{ error: { code: string } }>().error.code, 'validation_error');
  });
});
