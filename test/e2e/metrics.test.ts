import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import { Writable } from 'node:stream';
import pino from 'pino';
import { SERVICE_NAMES } from '../../src/config.ts';
import { OTHER_SCHEDULERS, SCHEDULER_SERIES_CAP } from '../../src/metrics/index.ts';
import type { HttpResponse } from '../helpers/http.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';
import { parsePrometheus, sampleValue, type PromFamily } from '../helpers/prometheus.ts';

// Issue 25, parts 1, 2 and 6: /metrics on every instance, the structured access log (README.md:
// Metrics, Access log).

const EMAIL = 'metrics@example.com';
const PASSWORD = 'correct horse battery staple';
const METRICS_TOKEN = 'metrics-token-0123456789abcdef';
const SCHEDULER_KEY = { 'x-api-key': 'test-scheduler-key' };
const JSON_TYPE = { 'content-type': 'application/json' };
const digestOf = (data: string) => `sha256:${createHash('sha256').update(data).digest('hex')}`;

/** Every family the README's Metrics table lists, and whether it may have no sample yet on this store. */
const FAMILIES: Record<string, 'always' | 'postgres' | 'maybe'> = {
  stratus_http_requests_total: 'always',
  stratus_http_request_duration_seconds: 'always',
  stratus_http_request_bytes_total: 'always',
  stratus_http_response_bytes_total: 'always',
  stratus_http_requests_in_flight: 'always',
  stratus_gateway_auth_total: 'always',
  stratus_metrics_probe_errors_total: 'maybe',
  stratus_sql_commit_batch_size: 'always',
  stratus_sql_commit_duration_seconds: 'always',
  stratus_sql_pool_connections: 'postgres',
  stratus_sql_pool_waiting: 'always',
  stratus_notifier_lag_seconds: 'always',
  stratus_notifier_connected: 'always',
  stratus_notifier_resyncs_total: 'always',
  stratus_scheduler_tasks: 'always',
  stratus_scheduler_schedulers: 'always',
  stratus_scheduler_deliveries_total: 'always',
  stratus_lambda_invocations_total: 'always',
  stratus_lambda_invocation_duration_seconds: 'always',
  stratus_lambda_isolates: 'always',
  stratus_lambda_isolate_waiters: 'always',
  stratus_logs_ingested_bytes_total: 'always',
  stratus_logs_streamed_bytes_total: 'always',
  stratus_logs_followers: 'always',
  stratus_logs_streams: 'always',
  stratus_files_bytes_total: 'always',
  stratus_registry_bytes_total: 'always',
  stratus_kv_seq: 'always',
  stratus_kv_operations_total: 'always',
  stratus_kv_replication_commands_total: 'always',
  stratus_kv_children: 'always',
  stratus_kv_parent_connected: 'always',
  stratus_kv_replica_lag_seconds: 'always',
  // prom-client's process metrics (collectDefaultMetrics on the instance's registry).
  process_cpu_seconds_total: 'always',
  process_resident_memory_bytes: 'always',
  nodejs_eventloop_lag_seconds: 'always',
  nodejs_heap_size_used_bytes: 'always',
};

/** Collects what a pino logger writes, line by line. */
function logSink(): { lines: string[]; logger: pino.Logger } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim() !== '') lines.push(line);
      done();
    },
  });
  return { lines, logger: pino({ level: 'info' }, sink) };
}

const accessLines = (lines: readonly string[]) =>
  lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.component === 'access');

/** Waits for a response to start, then hands back a way to end it (a follow stream). */
function openStream(port: number, host: string, path: string, headers: Record<string, string>): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, headers: { host, ...headers }, agent: false }, (res) => {
      res.on('error', () => {});
      resolve(() => req.destroy());
    });
    req.on('error', reject);
    req.end();
  });
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 20_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() - started > ms) throw new Error(`not reached in ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('metrics and the access log over a workload that touches every service', () => {
  let t: TestPlatform;
  const log = logSink();
  /** Every secret the workload sends: none may appear in a label or a log line. */
  const secrets: string[] = [METRICS_TOKEN, PASSWORD];
  /** Raw ids in paths: none may appear in a label. */
  const rawIds: string[] = [];
  let bearer: Record<string, string>;
  let keyPair: Record<string, string>;
  let loggerId = '';
  let metrics: Map<string, PromFamily>;
  /** A request whose access-log line is checked field by field. */
  let sample: HttpResponse;

  const call = (host: string, method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
    t.call({ method, path, host, headers, ...(body === undefined ? {} : { body }) });
  const scrape = async () => {
    const res = await t.callInternal({ path: '/metrics', host: `127.0.0.1:${t.platform.internalPort}` });
    assert.equal(res.status, 200, res.text);
    return parsePrometheus(res.text);
  };

  before(async () => {
    t = await startTestPlatform(
      { adminEmail: EMAIL, adminPassword: PASSWORD, metricsToken: METRICS_TOKEN, lambdaTimeoutSeconds: 1 },
      log.logger,
    );
    const login = await call(
      'auth.localhost',
      'POST',
      '/v0/login',
      JSON_TYPE,
      JSON.stringify({ email: EMAIL, password: PASSWORD }),
    );
    assert.equal(login.status, 200, login.text);
    const token = login.json<{ token: string }>().token;
    secrets.push(token);
    bearer = { authorization: `Bearer ${token}` };
    const cookie = { cookie: `stratus_session=${token}` };

    // apikeys, auth, gateway: an API key, used as headers and as Basic; a cookie; a failed key.
    const created = await call(
      'apikeys.localhost',
      'POST',
      '/v0/apikeys',
      { ...bearer, ...JSON_TYPE },
      '{"name":"metrics"}',
    );
    assert.equal(created.status, 201, created.text);
    const { key, secret } = created.json<{ key: string; secret: string }>();
    secrets.push(secret);
    keyPair = { 'api-key': key, 'api-secret': secret };
    const basicBlob = Buffer.from(`${key}:${secret}`).toString('base64');
    secrets.push(basicBlob);
    const basic = { authorization: `Basic ${basicBlob}` };
    assert.equal((await call('auth.localhost', 'GET', '/v0/me', cookie)).status, 200);
    sample = await call('gateway.localhost', 'GET', '/v0/secret', keyPair);
    assert.equal(sample.status, 200, sample.text);
    const wrong = { 'api-key': key, 'api-secret': 'not-the-secret-at-all' };
    secrets.push(wrong['api-secret']);
    assert.equal((await call('gateway.localhost', 'GET', '/v0/secret', wrong)).status, 401);
    assert.equal((await call('gateway.localhost', 'GET', '/version')).status, 200);

    // config
    assert.equal(
      (await call('config.localhost', 'POST', '/v0/configs', keyPair, '{"id":"site","entries":{"theme":"dark"}}'))
        .status,
      201,
    );
    assert.equal((await call('config.localhost', 'GET', '/v0/configs/site', cookie)).status, 200);

    // docdb
    const db = await call('docdb.localhost', 'POST', '/v1/databases', { ...bearer, ...JSON_TYPE }, '{"name":"shop"}');
    assert.equal(db.status, 201, db.text);
    const dbId = db.json<{ id: string }>().id;
    rawIds.push(dbId);
    const inserted = await call(
      'docdb.localhost',
      'POST',
      `/v1/databases/${dbId}/collections/items:insert`,
      bearer,
      '{"sku":"a1","price":3}\n{"sku":"b2","price":5}',
    );
    assert.equal(inserted.status, 201, inserted.text);

    // kv
    assert.equal((await call('kv.localhost', 'POST', '/v1/collections', keyPair, '{"name":"prefs"}')).status, 200);
    assert.equal(
      (await call('kv.localhost', 'POST', '/v1/collections/prefs/keys/theme', keyPair, '{"value":"dark"}')).status,
      200,
    );
    assert.equal((await call('kv.localhost', 'GET', '/v1/collections/prefs/keys/theme', keyPair)).status, 200);

    // files: bytes in and out
    const bucket = await call(
      'files.localhost',
      'POST',
      '/v1/buckets',
      { ...bearer, ...JSON_TYPE },
      '{"name":"assets"}',
    );
    assert.equal(bucket.status, 201, bucket.text);
    const bucketId = bucket.json<{ id: string }>().id;
    rawIds.push(bucketId);
    const put = await call('files.localhost', 'PUT', `/v1/buckets/${bucketId}/files/a/b.txt`, bearer, 'hello metrics');
    assert.equal(put.status, 201, put.text);
    assert.equal(
      (await call('files.localhost', 'GET', `/v1/buckets/${bucketId}/files/a/b.txt`, bearer)).text,
      'hello metrics',
    );

    // logs: a logger with its own key pair (passed through the gateway), ingest, a read
    const logger = await call('logs.localhost', 'POST', '/v1/loggers', { ...bearer, ...JSON_TYPE }, '{"name":"app"}');
    assert.equal(logger.status, 201, logger.text);
    loggerId = logger.json<{ id: string }>().id;
    rawIds.push(loggerId);
    const loggerKey = await call(
      'logs.localhost',
      'POST',
      `/v1/loggers/${loggerId}/apiKeys`,
      bearer,
      '{"name":"shipper"}',
    );
    assert.equal(loggerKey.status, 201, loggerKey.text);
    const loggerPair = loggerKey.json<{ key: string; secret: string }>();
    secrets.push(loggerPair.secret);
    const ingested = await call(
      'logs.localhost',
      'POST',
      `/v1/loggers/${loggerId}/ingest`,
      { 'api-key': loggerPair.key, 'api-secret': loggerPair.secret, 'content-type': 'text/plain' },
      'INFO up\nERROR down\n',
    );
    assert.equal(ingested.status, 200, ingested.text);
    assert.equal(
      (await call('logs.localhost', 'GET', `/v1/loggers/${loggerId}/filter?regex=ERROR`, bearer)).text,
      'ERROR down\n',
    );

    // lambda: a run that answers, one that runs past its time limit
    const hello = await call(
      'lambda.localhost',
      'POST',
      '/api/v0/lambdas',
      { ...bearer, ...JSON_TYPE },
      JSON.stringify({ name: 'hello', code: 'export default () => ({ ok: true })' }),
    );
    assert.equal(hello.status, 201, hello.text);
    const helloId = hello.json<{ id: string }>().id;
    rawIds.push(helloId);
    assert.equal((await call('lambda.localhost', 'POST', `/run/${helloId}`, JSON_TYPE, '{}')).status, 200);
    const spin = await call(
      'lambda.localhost',
      'POST',
      '/api/v0/lambdas',
      { ...bearer, ...JSON_TYPE },
      JSON.stringify({ name: 'spin', code: 'export default () => { for (;;) {} }' }),
    );
    assert.equal(spin.status, 201, spin.text);
    assert.equal(
      (await call('lambda.localhost', 'POST', `/run/${spin.json<{ id: string }>().id}`, JSON_TYPE, '{}')).status,
      500,
    );

    // scheduler: more schedulers than the per-scheduler cap, one delivering to the lambda
    for (let i = 0; i < SCHEDULER_SERIES_CAP + 5; i++) {
      const id = `sched-${String(i).padStart(2, '0')}`;
      const made = await call(
        'scheduler.localhost',
        'POST',
        '/schedulers',
        { ...SCHEDULER_KEY, ...JSON_TYPE },
        JSON.stringify({ id, display_name: id }),
      );
      assert.equal(made.status, 201, made.text);
      for (let n = 0; n < i % 3; n++) {
        const task = await call(
          'scheduler.localhost',
          'POST',
          `/schedulers/${id}/tasks`,
          { ...SCHEDULER_KEY, ...JSON_TYPE },
          JSON.stringify({ delay: '1h', payload: { n } }),
        );
        assert.equal(task.status, 202, task.text);
      }
    }
    const targeted = await call(
      'scheduler.localhost',
      'POST',
      '/schedulers',
      { ...SCHEDULER_KEY, ...bearer, ...JSON_TYPE },
      JSON.stringify({ id: 'to-lambda', display_name: 'To lambda', target: { lambda_id: helloId } }),
    );
    assert.equal(targeted.status, 201, targeted.text);
    const delivered = await call(
      'scheduler.localhost',
      'POST',
      '/schedulers/to-lambda/tasks',
      { ...SCHEDULER_KEY, ...JSON_TYPE },
      '{"payload":{"hi":1}}',
    );
    assert.equal(delivered.status, 202, delivered.text);

    // run: a registry push with the key as Basic credentials
    const blob = 'layer of metrics';
    const pushed = await call(
      'api.localhost',
      'POST',
      `/v2/metrics/app/blobs/uploads/?digest=${digestOf(blob)}`,
      { ...basic, 'content-type': 'application/octet-stream' },
      blob,
    );
    assert.equal(pushed.status, 201, pushed.text);

    // console
    await call('console.localhost', 'GET', '/');

    // 200 distinct raw paths of each kind: ids that must never become labels
    for (let i = 0; i < 200; i++) {
      const id = randomUUID();
      rawIds.push(id);
      await call('docdb.localhost', 'GET', `/v1/databases/${id}`, bearer);
      await call('config.localhost', 'GET', `/v0/configs/${id}`, keyPair);
      await call('kv.localhost', 'POST', `/v1/collections/prefs/keys/${id}`, keyPair, '{"value":1}');
      await call('api.localhost', 'GET', `/no/such/${id}`);
    }

    // The delivery happens in the background: wait for it through the metrics themselves.
    metrics = await until(
      scrape,
      (m) => sampleValue(m.get('stratus_scheduler_deliveries_total'), { target: 'lambda', outcome: 'succeeded' }) >= 1,
    );
  });

  after(async () => {
    await t?.close();
  });

  it('serves every family on the internal port, parsed by a Prometheus text parser', () => {
    const postgres = t.platform.store.sql.dialect === 'postgres';
    for (const [name, rule] of Object.entries(FAMILIES)) {
      const family = metrics.get(name);
      assert.ok(family, `family ${name} missing`);
      if (rule === 'always' || (rule === 'postgres' && postgres))
        assert.ok(family.samples.length > 0, `family ${name} has no sample`);
    }
    for (const service of [...SERVICE_NAMES, 'gateway'])
      assert.ok(
        sampleValue(metrics.get('stratus_http_requests_total'), { service }) > 0,
        `no request counted for ${service}`,
      );
  });

  it('counts what the workload did, in each family', () => {
    const requests = metrics.get('stratus_http_requests_total');
    assert.equal(
      sampleValue(requests, {
        port: 'public',
        service: 'docdb',
        route: '/v1/databases/:databaseId',
        method: 'GET',
        code: '404',
      }),
      200,
    );
    assert.equal(
      sampleValue(requests, { service: 'gateway', route: 'other', code: '404' }),
      200,
      'unclaimed api. paths',
    );
    const auth = metrics.get('stratus_gateway_auth_total');
    for (const outcome of ['api_key', 'basic', 'bearer_session', 'cookie', 'anonymous', 'rejected'])
      assert.ok(sampleValue(auth, { outcome }) > 0, `auth outcome ${outcome}`);
    const lambda = metrics.get('stratus_lambda_invocations_total');
    assert.ok(sampleValue(lambda, { trigger: 'http', outcome: 'ok' }) >= 1);
    assert.equal(sampleValue(lambda, { trigger: 'http', outcome: 'timeout' }), 1);
    assert.ok(sampleValue(lambda, { trigger: 'task', outcome: 'ok' }) >= 1);
    assert.ok(sampleValue(metrics.get('stratus_lambda_isolates')) > 0);
    assert.equal(sampleValue(metrics.get('stratus_files_bytes_total'), { direction: 'in' }), 'hello metrics'.length);
    assert.equal(sampleValue(metrics.get('stratus_files_bytes_total'), { direction: 'out' }), 'hello metrics'.length);
    assert.equal(
      sampleValue(metrics.get('stratus_registry_bytes_total'), { direction: 'in' }),
      'layer of metrics'.length,
    );
    assert.equal(sampleValue(metrics.get('stratus_logs_ingested_bytes_total')), 'INFO up\nERROR down\n'.length);
    assert.equal(sampleValue(metrics.get('stratus_logs_streamed_bytes_total')), 'ERROR down\n'.length);
    assert.ok(sampleValue(metrics.get('stratus_kv_seq')) >= 201);
    assert.ok(sampleValue(metrics.get('stratus_kv_operations_total'), { kind: 'write' }) >= 201);
    assert.ok(sampleValue(metrics.get('stratus_sql_commit_batch_size')) > 0);
    assert.equal(sampleValue(metrics.get('stratus_notifier_connected')), 1);
    assert.ok(sampleValue(metrics.get('stratus_http_request_bytes_total'), { port: 'public', service: 'files' }) > 0);
    assert.ok(sampleValue(metrics.get('stratus_http_response_bytes_total'), { port: 'public', service: 'files' }) > 0);
  });

  it('caps the per-scheduler series at the largest schedulers plus one bucket for the rest', () => {
    const tasks = metrics.get('stratus_scheduler_tasks')!;
    const schedulers = new Set(tasks.samples.map((m) => m.labels.scheduler));
    assert.equal(schedulers.size, SCHEDULER_SERIES_CAP + 1);
    assert.ok(schedulers.has(OTHER_SCHEDULERS));
    assert.equal(sampleValue(metrics.get('stratus_scheduler_schedulers')), SCHEDULER_SERIES_CAP + 6);
    // Every task is in some series, the bucket included: 0 + 1 + 2 tasks in turn, none delivered.
    let expected = 0;
    for (let i = 0; i < SCHEDULER_SERIES_CAP + 5; i++) expected += i % 3;
    assert.equal(sampleValue(tasks, { state: 'scheduled' }), expected);
  });

  it('keeps label cardinality bounded: raw paths and ids never become labels, nor any secret', () => {
    const requests = metrics.get('stratus_http_requests_total')!;
    // Over 800 requests to distinct raw paths, counted in a few series.
    assert.ok(requests.samples.length < 120, `${requests.samples.length} request series`);
    const durations = metrics.get('stratus_http_request_duration_seconds')!;
    const latencySeries = durations.samples.filter((s) => s.name.endsWith('_count')).length;
    assert.ok(latencySeries < 80, `${latencySeries} latency series`);
    const values: string[] = [];
    for (const family of metrics.values())
      for (const sample of family.samples) values.push(...Object.values(sample.labels));
    for (const value of values) {
      for (const id of rawIds) assert.ok(!value.includes(id), `label value ${value} holds an id`);
      for (const secret of secrets) assert.ok(!value.includes(secret), 'a label value holds a secret');
    }
    for (const sample of requests.samples) {
      const route = sample.labels.route ?? '';
      assert.ok(route === 'other' || route.startsWith('/'), route);
      assert.ok(!/[0-9a-f]{8}-[0-9a-f]{4}-/.test(route), route);
    }
  });

  it('counts open follow streams while they last', async () => {
    const close = await openStream(
      t.platform.publicPort,
      'logs.localhost',
      `/v1/loggers/${loggerId}/filter?follow=true`,
      bearer,
    );
    try {
      const open = await until(scrape, (m) => sampleValue(m.get('stratus_logs_followers')) === 1);
      assert.ok(sampleValue(open.get('stratus_logs_streams')) >= 1);
    } finally {
      close();
    }
    await until(scrape, (m) => sampleValue(m.get('stratus_logs_followers')) === 0);
  });

  it('serves /metrics on the public port only with METRICS_TOKEN as a bearer token', async () => {
    for (const host of ['gateway.localhost', `127.0.0.1:${t.platform.publicPort}`]) {
      const none = await t.call({ path: '/metrics', host });
      assert.equal(none.status, 401, none.text);
      assert.equal(none.headers['www-authenticate'], 'Bearer realm="metrics"');
      assert.equal(none.json<{ error: { code: string } }>().error.code, 'unauthorized');
      const wrong = await t.call({ path: '/metrics', host, headers: { authorization: `Bearer ${METRICS_TOKEN}x` } });
      assert.equal(wrong.status, 401);
      const session = await t.call({ path: '/metrics', host, headers: bearer });
      assert.equal(session.status, 401, 'a session token is not the metrics token');
      const right = await t.call({ path: '/metrics', host, headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
      assert.equal(right.status, 200, right.text);
      assert.match(String(right.headers['content-type']), /^text\/plain; version=0\.0\.4/);
      assert.ok(parsePrometheus(right.text).has('stratus_http_requests_total'));
    }
    // A service host keeps its own paths.
    const onService = await t.call({
      path: '/metrics',
      host: 'config.localhost',
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    assert.equal(onService.status, 404);
  });

  it('writes one access-log line per request with its fields, and no secret anywhere in the log', async () => {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const lines = accessLines(log.lines);
    const requestId = String(sample.headers['x-request-id']);
    const line = lines.find((l) => l.request_id === requestId);
    assert.ok(line, 'the access line of the sample request');
    assert.equal(line.method, 'GET');
    assert.equal(line.host, 'gateway.localhost');
    assert.equal(line.path, '/v0/secret');
    assert.equal(line.service, 'gateway');
    assert.equal(line.route, '/v0/secret');
    assert.equal(line.status, 200);
    assert.equal(line.caller, 'api_key');
    assert.equal(typeof line.user, 'string');
    assert.equal(typeof line.duration_ms, 'number');
    assert.ok((line.bytes_in as number) > 0 && (line.bytes_out as number) > 0);
    // Refused requests carry a request id too, in the answer and the line.
    const refused = lines.find((l) => l.caller === 'rejected');
    assert.ok(refused && typeof refused.request_id === 'string');
    assert.ok(lines.length > 800);
    const all = log.lines.join('\n');
    for (const secret of secrets) assert.ok(!all.includes(secret), 'a secret in the log output');
  });
});

describe('without METRICS_TOKEN, and with ACCESS_LOG=off', () => {
  let t: TestPlatform;
  const log = logSink();

  before(async () => {
    t = await startTestPlatform({ accessLog: false }, log.logger);
  });
  after(async () => {
    await t?.close();
  });

  it('does not serve /metrics on the public port; the internal port does, on its front hosts', async () => {
    const onGateway = await t.call({ path: '/metrics', host: 'gateway.localhost' });
    assert.equal(onGateway.status, 404);
    assert.equal(onGateway.json<{ error: { code: string } }>().error.code, 'not_found');
    const onAddress = await t.call({ path: '/metrics', host: `127.0.0.1:${t.platform.publicPort}` });
    assert.equal(onAddress.status, 404);
    for (const host of [
      'gateway.localhost',
      'localhost',
      `127.0.0.1:${t.platform.internalPort}`,
      'stratus-1.example',
    ]) {
      const res = await t.callInternal({ path: '/metrics', host });
      assert.equal(res.status, 200, `${host}: ${res.text}`);
      assert.ok(parsePrometheus(res.text).has('process_cpu_seconds_total'));
    }
    const head = await t.callInternal({ method: 'HEAD', path: '/metrics', host: 'gateway.localhost' });
    assert.equal(head.status, 200);
    assert.equal(head.text, '');
  });

  it('keeps a trusted caller’s well-formed X-Request-Id on the internal port and replaces the rest', async () => {
    const kept = await t.callInternal({
      path: '/v0/configs',
      host: 'config.localhost',
      headers: { 'x-request-id': 'trace-42.a_b' },
    });
    assert.equal(kept.headers['x-request-id'], 'trace-42.a_b');
    const replaced = await t.callInternal({
      path: '/v0/configs',
      host: 'config.localhost',
      headers: { 'x-request-id': 'not ok!' },
    });
    assert.match(String(replaced.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    const publicPort = await t.call({
      path: '/v0/configs',
      host: 'config.localhost',
      headers: { 'x-request-id': 'trace-42' },
    });
    assert.match(String(publicPort.headers['x-request-id']), /^[0-9a-f-]{36}$/, 'the public port always makes its own');
  });

  it('writes no access-log line', async () => {
    await t.call({ path: '/v0/configs', host: 'config.localhost' });
    await t.callInternal({ path: '/v0/configs', host: 'config.localhost' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(accessLines(log.lines), []);
  });
});
