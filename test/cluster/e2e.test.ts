import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { openStream } from '../services/logs/helpers.ts';
import { CLUSTER_ADMIN, Cluster, SCHEDULER_KEY, sleep, startLoad, writes, type ClusterResponse } from './cluster.ts';

// Three `stratus serve` instances on one PostgreSQL schema behind HAProxy (deploy/haproxy.cfg,
// round robin, health checks), driven from outside. Runs with `npm run test:cluster`, which sets
// STRATUS_CLUSTER=1 and needs DATABASE_URL; the plain suites skip it.
const skip =
  process.env.STRATUS_CLUSTER !== '1'
    ? 'the cluster suite runs with npm run test:cluster'
    : !process.env.DATABASE_URL && 'the cluster suite needs DATABASE_URL (PostgreSQL)';

const INSTANCES = 3;
const json = { 'content-type': 'application/json' };
const digestOf = (data: string) => `sha256:${createHash('sha256').update(data).digest('hex')}`;

function ok(res: ClusterResponse, status = 200): ClusterResponse {
  assert.equal(res.status, status, `${res.servedBy ?? 'direct'}: ${res.text.slice(0, 500)}`);
  return res;
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check()) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(20);
  }
}

describe('a three-instance cluster behind HAProxy', { skip }, () => {
  let cluster: Cluster;
  let bearer: Record<string, string>;
  let key: { key: string; secret: string };
  let keyHeaders: Record<string, string>;
  const all = Array.from({ length: INSTANCES }, (_, i) => i);

  before(async () => {
    const started = Date.now();
    cluster = await Cluster.start({ instances: INSTANCES });
    console.log(`cluster of ${INSTANCES} up behind HAProxy in ${Date.now() - started} ms`);
  });

  after(async () => {
    await cluster?.close();
  });

  it('sends consecutive requests to each instance in turn, and every instance answers directly too', async () => {
    const served: string[] = [];
    for (let i = 0; i < 2 * INSTANCES; i++)
      served.push(ok(await cluster.request({ path: '/version', host: 'gateway.localhost' })).servedBy!);
    assert.deepEqual(new Set(served.slice(0, INSTANCES)), new Set(cluster.instances.map((x) => x.name)), served.join());
    assert.deepEqual(served.slice(INSTANCES), served.slice(0, INSTANCES), 'round robin repeats the same order');
    for (const i of all) ok(await cluster.requestTo(i, { path: '/version', host: 'gateway.localhost' }));
    const stats = await cluster.stats();
    assert.deepEqual(
      stats.map((row) => row.status),
      all.map(() => 'UP'),
    );
    const status = ok(await cluster.request({ path: '/v0/status', host: 'gateway.localhost' })).json<
      { id: string; status: number }[]
    >();
    for (const service of ['auth', 'apikeys', 'config', 'docdb', 'files', 'kv', 'lambda', 'logs', 'run', 'scheduler'])
      assert.equal(status.find((row) => row.id === service)?.status, 200, `${service} in /v0/status`);
    const console = ok(await cluster.request({ path: '/', host: 'console.localhost' }));
    assert.match(String(console.headers['content-type']), /text\/html/);
  });

  it('a session made through the balancer works on every instance', async () => {
    const login = ok(
      await cluster.request({
        method: 'POST',
        path: '/v0/login',
        host: 'auth.localhost',
        headers: json,
        body: JSON.stringify(CLUSTER_ADMIN),
      }),
    );
    const { token } = login.json<{ token: string }>();
    bearer = { authorization: `Bearer ${token}` };
    const madeOn = login.servedBy;
    assert.ok(madeOn);
    for (const i of all)
      ok(await cluster.requestTo(i, { path: '/v0/secret', host: 'gateway.localhost', headers: bearer }));
    const through = new Set<string>();
    for (const _ of all)
      through.add(ok(await cluster.request({ path: '/v0/secret', host: 'api.localhost', headers: bearer })).servedBy!);
    assert.equal(through.size, INSTANCES);
  });

  it('an API key made through the balancer works everywhere, and once revoked is refused at once everywhere', async () => {
    const created = ok(
      await cluster.request({
        method: 'POST',
        path: '/v0/apikeys',
        host: 'api.localhost',
        headers: { ...bearer, ...json },
        body: '{"name":"cluster"}',
      }),
      201,
    );
    key = created.json<{ key: string; secret: string }>();
    keyHeaders = { 'api-key': key.key, 'api-secret': key.secret };
    const madeOn = created.servedBy;
    const landed = new Set<string>();
    for (const _ of all)
      landed.add(
        ok(await cluster.request({ path: '/v0/secret', host: 'api.localhost', headers: keyHeaders })).servedBy!,
      );
    assert.equal(landed.size, INSTANCES, 'the key was checked by every instance');
    for (const i of all)
      ok(await cluster.requestTo(i, { path: '/v0/secret', host: 'gateway.localhost', headers: keyHeaders }));

    // A second key, cached as valid on every instance, then revoked through the balancer.
    const doomed = ok(
      await cluster.request({
        method: 'POST',
        path: '/v0/apikeys',
        host: 'api.localhost',
        headers: { ...bearer, ...json },
        body: '{"name":"doomed"}',
      }),
      201,
    ).json<{ key: string; secret: string }>();
    const doomedHeaders = { 'api-key': doomed.key, 'api-secret': doomed.secret };
    for (const i of all)
      ok(await cluster.requestTo(i, { path: '/v0/secret', host: 'gateway.localhost', headers: doomedHeaders }));
    const revoked = ok(
      await cluster.request({
        method: 'DELETE',
        path: `/v0/apikeys/${doomed.key}`,
        host: 'api.localhost',
        headers: bearer,
      }),
    );
    // At once: the next request through each instance is refused (caches are fenced on the notifier).
    for (const i of all)
      assert.equal(
        (await cluster.requestTo(i, { path: '/v0/secret', host: 'gateway.localhost', headers: doomedHeaders })).status,
        401,
        `instance ${i} after the revocation on ${revoked.servedBy}`,
      );
    assert.ok(madeOn);
  });

  it('a logs follow on one instance sees lines ingested through the balancer', async () => {
    const logger = ok(
      await cluster.request({
        method: 'POST',
        path: '/v1/loggers',
        host: 'logs.localhost',
        headers: { ...keyHeaders, ...json },
        body: '{"name":"cluster"}',
      }),
      201,
    ).json<{ id: string }>();
    const follower = cluster.instances[2]!;
    const stream = await openStream(follower.publicPort, `/v1/loggers/${logger.id}/filter?regex=hit&follow`, {
      ...keyHeaders,
      host: 'logs.localhost',
    });
    try {
      assert.equal(stream.status, 200);
      let expected = '';
      const ingestedOn = new Set<string>();
      for (let i = 0; i < 6; i++) {
        const ingested = ok(
          await cluster.request({
            method: 'POST',
            path: `/v1/loggers/${logger.id}/ingest`,
            host: 'logs.localhost',
            headers: keyHeaders,
            body: `miss ${i}\nhit ${i}\n`,
          }),
        );
        ingestedOn.add(ingested.servedBy!);
        expected += `hit ${i}\n`;
        await stream.waitFor((text) => text === expected, 3_000);
      }
      assert.equal(ingestedOn.size, INSTANCES, 'lines were ingested on every instance');
    } finally {
      stream.close();
    }
  });

  it('a scheduler stream on one instance sees tasks enqueued through the balancer', async () => {
    const schedulerKey = { 'x-api-key': SCHEDULER_KEY };
    ok(
      await cluster.request({
        method: 'POST',
        path: '/schedulers',
        host: 'scheduler.localhost',
        headers: { ...schedulerKey, ...json },
        body: '{"id":"cluster","display_name":"Cluster"}',
      }),
      201,
    );
    const totals: number[] = [];
    const req = http.get({
      host: '127.0.0.1',
      port: cluster.instances[1]!.publicPort,
      path: '/schedulers/cluster/tasks/stream',
      headers: { host: 'scheduler.localhost', ...schedulerKey },
      agent: false,
    });
    const waiters: (() => void)[] = [];
    req.on('response', (res) => {
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = frame.split('\n').find((line) => line.startsWith('data: '));
          if (!data) continue;
          totals.push((JSON.parse(data.slice(6)) as { scheduled_meta: { total: number } }).scheduled_meta.total);
          for (const wake of waiters.splice(0)) wake();
        }
      });
    });
    const sawTotal = (total: number) =>
      waitUntil(async () => {
        if (totals.includes(total)) return true;
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 200);
        });
        return totals.includes(total);
      }, 5_000);
    try {
      await sawTotal(0);
      const enqueuedOn = new Set<string>();
      for (let i = 1; i <= INSTANCES; i++) {
        const enqueued = ok(
          await cluster.request({
            method: 'POST',
            path: '/schedulers/cluster/tasks',
            host: 'scheduler.localhost',
            headers: { ...schedulerKey, ...json },
            body: JSON.stringify({ id: `task-${i}` }),
          }),
          202,
        );
        enqueuedOn.add(enqueued.servedBy!);
        await sawTotal(i);
      }
      assert.equal(enqueuedOn.size, INSTANCES);
    } finally {
      req.destroy();
    }
  });

  it('a file written on one instance is read on the others', async () => {
    const bucket = ok(
      await cluster.request({
        method: 'POST',
        path: '/v1/buckets',
        host: 'files.localhost',
        headers: { ...keyHeaders, ...json },
        body: '{"name":"cluster"}',
      }),
      201,
    ).json<{ id: string }>();
    const content = 'written on instance one\n'.repeat(1000);
    ok(
      await cluster.requestTo(0, {
        method: 'PUT',
        path: `/v1/buckets/${bucket.id}/files/docs/one.txt`,
        host: 'files.localhost',
        headers: keyHeaders,
        body: content,
      }),
      201,
    );
    for (const i of [1, 2]) {
      const read = ok(
        await cluster.requestTo(i, {
          path: `/v1/buckets/${bucket.id}/files/docs/one.txt`,
          host: 'files.localhost',
          headers: keyHeaders,
        }),
      );
      assert.equal(read.text, content);
    }
    const ranged = ok(
      await cluster.request({
        path: `/v1/buckets/${bucket.id}/files/docs/one.txt`,
        host: 'files.localhost',
        headers: { ...keyHeaders, range: 'bytes=0-6' },
      }),
      206,
    );
    assert.equal(ranged.text, 'written');
  });

  it('a registry blob upload started on one instance is continued and finished on the others', async () => {
    const basic = { authorization: `Basic ${Buffer.from(`${key.key}:${key.secret}`).toString('base64')}` };
    const name = 'cluster/app';
    const host = 'run.localhost';
    const started = ok(
      await cluster.requestTo(0, { method: 'POST', path: `/v2/${name}/blobs/uploads/`, host, headers: basic }),
      202,
    );
    const location = String(started.headers.location);
    const first = 'first chunk, instance one; ';
    const second = 'second chunk, instance two';
    const layer = first + second;
    const patched = ok(
      await cluster.requestTo(0, {
        method: 'PATCH',
        path: location,
        host,
        headers: { ...basic, 'content-type': 'application/octet-stream' },
        body: first,
      }),
      202,
    );
    assert.equal(patched.headers.range, `0-${first.length - 1}`);
    const continued = ok(
      await cluster.requestTo(1, {
        method: 'PATCH',
        path: location,
        host,
        headers: { ...basic, 'content-type': 'application/octet-stream' },
        body: second,
      }),
      202,
    );
    assert.equal(continued.headers.range, `0-${layer.length - 1}`);
    ok(
      await cluster.requestTo(2, {
        method: 'PUT',
        path: `${location}?digest=${digestOf(layer)}`,
        host,
        headers: basic,
      }),
      201,
    );
    const config = '{}';
    ok(
      await cluster.requestTo(1, {
        method: 'POST',
        path: `/v2/${name}/blobs/uploads/?digest=${digestOf(config)}`,
        host,
        headers: { ...basic, 'content-type': 'application/octet-stream' },
        body: config,
      }),
      201,
    );
    for (const i of all) {
      const head = ok(
        await cluster.requestTo(i, {
          method: 'HEAD',
          path: `/v2/${name}/blobs/${digestOf(layer)}`,
          host,
          headers: basic,
        }),
      );
      assert.equal(head.headers['content-length'], String(layer.length));
    }
    const manifest = JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
      config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: 2, digest: digestOf(config) },
      layers: [
        { mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: layer.length, digest: digestOf(layer) },
      ],
    });
    ok(
      await cluster.request({
        method: 'PUT',
        path: `/v2/${name}/manifests/v1`,
        host,
        headers: { ...basic, 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' },
        body: manifest,
      }),
      201,
    );
    for (const i of all) {
      const console = ok(await cluster.requestTo(i, { path: `/api/console?repository=${name}`, host, headers: basic }));
      assert.deepEqual(console.json<{ references: string[] }>().references, ['v1']);
    }
  });

  it('docdb documents inserted on one instance are found on the others', async () => {
    const db = ok(
      await cluster.request({
        method: 'POST',
        path: '/v1/databases',
        host: 'docdb.localhost',
        headers: { ...keyHeaders, ...json },
        body: '{"name":"cluster"}',
      }),
      201,
    ).json<{ id: string }>();
    ok(
      await cluster.requestTo(0, {
        method: 'POST',
        path: `/v1/databases/${db.id}/collections/items:insert`,
        host: 'docdb.localhost',
        headers: keyHeaders,
        body: '{"sku":"a1","price":3}\n{"sku":"b2","price":5}\n{"sku":"c3","price":8}',
      }),
      201,
    );
    for (const i of [1, 2]) {
      const found = ok(
        await cluster.requestTo(i, {
          method: 'POST',
          path: `/v1/databases/${db.id}/collections/items:find`,
          host: 'docdb.localhost',
          headers: keyHeaders,
          body: '{"filter":{"price":{"$gt":4}},"limit":-1}',
        }),
      );
      const skus = found.text
        .split('\n')
        .filter(Boolean)
        .map((line) => (JSON.parse(line) as { sku: string }).sku);
      assert.deepEqual(skus, ['b2', 'c3']);
    }
  });

  it('config objects and the per-user map are written and read across instances', async () => {
    ok(
      await cluster.requestTo(0, {
        method: 'POST',
        path: '/v0/configs',
        host: 'config.localhost',
        headers: json,
        body: '{"id":"site","entries":{"theme":"dark"}}',
      }),
      201,
    );
    ok(
      await cluster.requestTo(1, {
        method: 'PATCH',
        path: '/v0/configs/site',
        host: 'config.localhost',
        headers: json,
        body: '{"lang":"fr"}',
      }),
    );
    for (const i of all)
      assert.deepEqual(ok(await cluster.requestTo(i, { path: '/v0/configs/site', host: 'config.localhost' })).json(), {
        id: 'site',
        entries: { theme: 'dark', lang: 'fr' },
      });
    const patchedOn = new Set<string>();
    for (const i of all)
      patchedOn.add(
        ok(
          await cluster.request({
            method: 'PATCH',
            path: '/v1/config',
            host: 'config.localhost',
            headers: { ...bearer, ...json },
            body: JSON.stringify({ [`from.${i}`]: i }),
          }),
        ).servedBy!,
      );
    assert.equal(patchedOn.size, INSTANCES);
    for (const i of all)
      assert.deepEqual(
        ok(await cluster.requestTo(i, { path: '/v1/config', host: 'config.localhost', headers: keyHeaders })).json(),
        { entries: { 'from.0': 0, 'from.1': 1, 'from.2': 2 } },
      );
  });

  it('a lambda created on one instance runs on every instance', async () => {
    const lambda = ok(
      await cluster.requestTo(2, {
        method: 'POST',
        path: '/api/v0/lambdas',
        host: 'lambda.localhost',
        headers: { ...keyHeaders, ...json },
        body: JSON.stringify({ name: 'echo', code: 'export default async (req) => ({ got: req.body })' }),
      }),
      201,
    ).json<{ id: string }>();
    for (const i of all) {
      const ran = ok(
        await cluster.requestTo(i, {
          method: 'POST',
          path: `/run/${lambda.id}`,
          host: 'lambda.localhost',
          headers: json,
          body: JSON.stringify({ on: i }),
        }),
      );
      assert.deepEqual(ran.json(), { got: { on: i } });
    }
    ok(
      await cluster.requestTo(0, {
        method: 'PATCH',
        path: `/api/v0/lambdas/${lambda.id}`,
        host: 'lambda.localhost',
        headers: { ...keyHeaders, ...json },
        body: JSON.stringify({ code: 'export default async () => ({ version: 2 })' }),
      }),
    );
    for (const i of all)
      await waitUntil(async () => {
        const ran = await cluster.requestTo(i, { method: 'POST', path: `/run/${lambda.id}`, host: 'lambda.localhost' });
        return ran.status === 200 && ran.text === '{"version":2}';
      }, 2_000);
  });

  it('kv collections and keys are written and read across instances', async () => {
    ok(
      await cluster.requestTo(0, {
        method: 'POST',
        path: '/v1/collections',
        host: 'kv.localhost',
        headers: { ...keyHeaders, ...json },
        body: '{"name":"flags"}',
      }),
    );
    ok(
      await cluster.requestTo(1, {
        method: 'POST',
        path: '/v1/collections/flags/keys/beta',
        host: 'kv.localhost',
        headers: { ...keyHeaders, ...json },
        body: '{"value":{"on":true}}',
      }),
    );
    for (const i of all) {
      const read = ok(
        await cluster.requestTo(i, {
          path: '/v1/collections/flags/keys/beta',
          host: 'kv.localhost',
          headers: keyHeaders,
        }),
      );
      assert.deepEqual(read.json<{ value: unknown }>().value, { on: true });
    }
  });

  it('the load generator: every write acknowledged through the balancer is there, none failed', async () => {
    ok(
      await cluster.request({
        method: 'POST',
        path: '/v1/collections',
        host: 'kv.localhost',
        headers: { ...keyHeaders, ...json },
        body: '{"name":"load"}',
      }),
    );
    const configs = writes.config(cluster, 'load');
    const kv = writes.kv(cluster, 'load', keyHeaders);
    const loads = [startLoad({ concurrency: 4, next: configs.next }), startLoad({ concurrency: 4, next: kv.next })];
    await sleep(3_000);
    const [configReport, kvReport] = await Promise.all(loads.map((load) => load.stop()));
    for (const [name, report, check] of [
      ['config', configReport!, configs.missing],
      ['kv', kvReport!, kv.missing],
    ] as const) {
      const missing = await check(report.acknowledged);
      console.log(
        `${name}: ${report.acknowledged.length} acknowledged, ${report.failed.length} failed, ${missing.length} lost in ${report.durationMs} ms; by instance ${JSON.stringify(report.byInstance)}`,
      );
      assert.deepEqual(report.failed, []);
      assert.deepEqual(missing, []);
      assert.ok(report.acknowledged.length > 0);
      assert.equal(Object.keys(report.byInstance).length, INSTANCES);
    }
  });
  it('an instance killed by index is taken out by the health check and put back after its restart', async () => {
    const victim = cluster.instances[2]!;
    await cluster.killInstance(victim.index);
    assert.equal(victim.running, false);
    await cluster.waitForBalancer(victim.index, 'DOWN');
    const served = new Set<string>();
    for (let i = 0; i < 2 * INSTANCES; i++)
      served.add(ok(await cluster.request({ path: '/v0/configs/site', host: 'config.localhost' })).servedBy!);
    assert.deepEqual([...served].sort(), ['stratus1', 'stratus2']);
    const started = Date.now();
    await cluster.startInstance(victim.index);
    await cluster.waitForBalancer(victim.index, 'UP');
    console.log(`${victim.name} back in the balancer ${Date.now() - started} ms after its restart began`);
    // Round-robin re-places a server that comes back at HAProxy's own point in its rotation, so the
    // next three requests need not be one per instance; within a few rounds the victim takes some.
    served.clear();
    for (let i = 0; i < 4 * INSTANCES && served.size < INSTANCES; i++)
      served.add(ok(await cluster.request({ path: '/v0/configs/site', host: 'config.localhost' })).servedBy!);
    assert.deepEqual([...served].sort(), ['stratus1', 'stratus2', 'stratus3']);
  });
});
