import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Writable } from 'node:stream';
import pino from 'pino';
import { startTestPlatform, storeDigest, type TestPlatform } from '../../helpers/platform.ts';

// Issue 23, part 2: a scheduler's due tasks delivered to a lambda by the platform (README: Delivery).

const KEY = { 'x-api-key': 'test-scheduler-key' };
const as = (user: string) => ({ 'x-gateway-authentication': JSON.stringify({ user: { id: user } }) });
const json = { 'content-type': 'application/json' };

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 20_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() - started > ms) throw new Error(`not reached in ${ms} ms: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

interface Invocation {
  trigger: string;
  status: number;
  error: { code: string; message: string } | null;
  logs: { level: string; message: string }[];
}

describe('scheduler delivery to lambdas (whole platform)', () => {
  let p: TestPlatform;
  const lines: string[] = [];
  before(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString('utf8'));
        done();
      },
    });
    p = await startTestPlatform({}, pino({ level: 'debug' }, sink));
  });
  after(async () => {
    await p.close();
  });

  const scheduler = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    p.callInternal({
      method,
      path,
      host: 'scheduler.localhost',
      headers: { ...KEY, ...json, ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const lambda = (method: string, path: string, user: string, body?: unknown) =>
    p.callInternal({
      method,
      path,
      host: 'lambda.localhost',
      headers: { ...as(user), ...json },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const createLambda = async (user: string, name: string, code: string) => {
    const res = await lambda('POST', '/api/v0/lambdas', user, { name, code });
    assert.equal(res.status, 201, res.text);
    return res.json<{ id: string }>().id;
  };
  const invocations = async (id: string, user: string) => {
    const res = await lambda('GET', `/api/v0/lambdas/${id}/invocations`, user);
    assert.equal(res.status, 200, res.text);
    return res.json<{ invocations: Invocation[] }>().invocations;
  };
  const taskCount = async (id: string) => {
    const res = await scheduler('GET', `/schedulers/${id}/health`);
    const health = res.json<{ scheduled: number; inflight: number }>();
    return health.scheduled + health.inflight;
  };

  it('delivers a task as the target owner with ctx.trigger and the payload as the body; a 2xx acknowledges it', async () => {
    const id = await createLambda(
      'user-ada',
      'seer',
      'export default (req, ctx) => { console.log(JSON.stringify({ trigger: ctx.trigger, body: req.body, method: req.method })); return { ok: true } }',
    );
    const created = await scheduler(
      'POST',
      '/schedulers',
      { id: 'to-lambda', display_name: 'To lambda', target: { lambda_id: id } },
      as('user-ada'),
    );
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(created.json<{ scheduler: { target: unknown } }>().scheduler.target, { lambda_id: id });
    const enqueued = await scheduler('POST', '/schedulers/to-lambda/tasks', {
      id: 'job-1',
      payload: { hello: 'world', n: [1, 2] },
      labels: ['kind:test'],
    });
    assert.equal(enqueued.status, 202, enqueued.text);
    await until(
      () => taskCount('to-lambda'),
      (n) => n === 0,
    );
    const [entry] = await until(
      () => invocations(id, 'user-ada'),
      (list) => list.length > 0,
    );
    assert.equal(entry?.trigger, 'task');
    assert.equal(entry?.status, 200);
    const seen = JSON.parse(entry!.logs[0]!.message) as Record<string, unknown>;
    assert.deepEqual(seen, {
      trigger: { type: 'task', scheduler_id: 'to-lambda', task_id: 'job-1', attempt: 1, labels: ['kind:test'] },
      body: { hello: 'world', n: [1, 2] },
      method: 'POST',
    });
  });

  it('retries a failing lambda with backoff, dead-letters it with the error, and a retry by hand after a fix delivers it', async () => {
    const id = await createLambda('user-ada', 'breaks', 'export default () => { throw new Error("not today") }');
    const created = await scheduler(
      'POST',
      '/schedulers',
      {
        id: 'retrying',
        display_name: 'Retrying',
        target: { lambda_id: id },
        retry: { max_attempts: 3, base: '100ms', factor: 2 },
      },
      as('user-ada'),
    );
    assert.equal(created.status, 201, created.text);
    await scheduler('POST', '/schedulers/retrying/tasks', { id: 'r-1', payload: 'x' });
    const dead = await until(
      async () =>
        (await scheduler('GET', '/schedulers/retrying/dead')).json<{
          dead: { id: string; attempts: number; last_error: string }[];
        }>(),
      (d) => d.dead.length === 1,
    );
    assert.equal(dead.dead[0]?.attempts, 3);
    assert.match(dead.dead[0]!.last_error, /^lambda answered 500: .*not today/);
    const runs = await until(
      () => invocations(id, 'user-ada'),
      (list) => list.length >= 3,
    );
    assert.equal(runs.length, 3);
    assert.ok(runs.every((r) => r.trigger === 'task' && r.status === 500));

    // A non-2xx answer counts as a failure too.
    const fixed = await lambda('PATCH', `/api/v0/lambdas/${id}`, 'user-ada', {
      code: 'export default (req, ctx) => new Response("later", { status: ctx.trigger.attempt === 1 ? 429 : 202 })',
    });
    assert.equal(fixed.status, 200, fixed.text);
    const retried = await scheduler('POST', '/schedulers/retrying/dead/r-1/retry');
    assert.equal(retried.status, 200, retried.text);
    // Attempt 1 answers 429 and the task waits with its error; attempt 2 answers 202 and acknowledges it.
    await until(
      () => taskCount('retrying'),
      (n) => n === 0,
    );
    const after = await invocations(id, 'user-ada');
    assert.deepEqual(
      after.slice(0, 2).map((r) => r.status),
      [202, 429],
    );
    assert.equal((await scheduler('GET', '/schedulers/retrying/dead')).json<{ dead: unknown[] }>().dead.length, 0);
  });

  it('refuses a lambda target without a platform user, or of a lambda the user cannot run; nothing changes', async () => {
    const adas = await createLambda('user-ada', 'private', 'export default () => 1');
    const before = await scheduler('POST', '/schedulers', { id: 'guarded', display_name: 'Guarded' });
    assert.equal(before.status, 201);
    const digest = await storeDigest(p.platform.store.sql);
    const cases: [string, string, unknown, Record<string, string>, RegExp][] = [
      ['POST', '/schedulers', { id: 'n1', display_name: 'n', target: { lambda_id: adas } }, {}, /platform user/],
      ['PATCH', '/schedulers/guarded', { target: { lambda_id: adas } }, {}, /platform user/],
      ['PUT', '/schedulers/guarded', { display_name: 'g', target: { lambda_id: adas } }, as('user-bob'), /you can run/],
      ['PATCH', '/schedulers/guarded', { target: { lambda_id: 'no-such-lambda' } }, as('user-ada'), /you can run/],
    ];
    for (const [method, path, body, headers, message] of cases) {
      const res = await scheduler(method, path, body, headers);
      assert.equal(res.status, 400, `${method} ${path}: ${res.text}`);
      const error = res.json<{ error: { code: string; message: string } }>().error;
      assert.equal(error.code, 'validation_error');
      assert.match(error.message, message);
    }
    assert.deepEqual(await storeDigest(p.platform.store.sql), digest, 'nothing changed');
    // An unknown scheduler is a 404 before its target is looked at (no lambda service call, no 400).
    for (const method of ['PATCH', 'PUT']) {
      const missing = await scheduler(method, '/schedulers/no-such-scheduler', {
        display_name: 'x',
        target: { lambda_id: adas },
      });
      assert.equal(missing.status, 404, `${method}: ${missing.text}`);
      assert.equal(missing.json<{ error: { code: string } }>().error.code, 'not_found');
    }
  });

  it('never logs a webhook secret', async () => {
    const secret = 'log-probe-secret-5d1e9a';
    const res = await scheduler('POST', '/schedulers', {
      id: 'quiet',
      display_name: 'Quiet',
      target: { url: 'http://127.0.0.1:9/in', secret },
      retry: { max_attempts: 1 },
    });
    assert.equal(res.status, 201);
    await scheduler('POST', '/schedulers/quiet/tasks', { id: 'q1' });
    await until(
      async () => (await scheduler('GET', '/schedulers/quiet/dead')).json<{ dead: unknown[] }>().dead.length,
      (n) => n === 1,
    );
    assert.ok(lines.length > 0, 'the log was captured');
    assert.ok(!lines.join('').includes(secret));
  });

  it('shows attempt and last_error of a task waiting for its retry in the task list and the stream', async () => {
    const id = await createLambda('user-ada', 'grumpy', 'export default () => new Response("no", { status: 502 })');
    const created = await scheduler(
      'POST',
      '/schedulers',
      { id: 'visible', display_name: 'Visible', target: { lambda_id: id }, retry: { base: '1h', cap: '2h' } },
      as('user-ada'),
    );
    assert.equal(created.status, 201, created.text);
    await scheduler('POST', '/schedulers/visible/tasks', { id: 'v1', labels: ['k:v'] });
    await scheduler('POST', '/schedulers/visible/tasks', { id: 'v0', delay: '1h' });
    const list = await until(
      async () =>
        (await scheduler('GET', '/schedulers/visible/tasks')).json<{ scheduled: Record<string, unknown>[] }>(),
      (l) => l.scheduled.some((t) => t.attempt === 1),
    );
    const v1 = list.scheduled.find((t) => t.id === 'v1');
    assert.equal(v1?.last_error, 'lambda answered 502');
    // A task never tried keeps the reference's shape.
    assert.deepEqual(Object.keys(list.scheduled.find((t) => t.id === 'v0')!), ['id', 'future', 'labels']);

    const frame = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const req = http.get(
        {
          host: '127.0.0.1',
          port: p.platform.internalPort,
          path: '/schedulers/visible/tasks/stream',
          headers: { host: 'scheduler.localhost' },
          agent: false,
        },
        (res) => {
          let buffer = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            buffer += chunk;
            const end = buffer.indexOf('\n\n');
            if (end < 0) return;
            const data = buffer
              .slice(0, end)
              .split('\n')
              .find((l) => l.startsWith('data: '));
            req.destroy();
            resolve(JSON.parse(data!.slice(6)) as Record<string, unknown>);
          });
        },
      );
      req.on('error', reject);
    });
    const scheduled = frame.scheduled as Record<string, unknown>[];
    assert.deepEqual(
      scheduled.map((t) => [t.id, t.attempt, t.last_error]),
      [
        ['v1', 1, 'lambda answered 502'],
        ['v0', undefined, undefined],
      ],
    );
  });
});
