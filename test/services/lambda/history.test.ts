import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { Settings } from '../../../src/config.ts';
import type { RunningPlatform } from '../../../src/platform.ts';
import { InvocationHistory, type InvocationItem, type InvocationRecord } from '../../../src/services/lambda/history.ts';
import { lambdaServiceWith } from '../../../src/services/lambda/index.ts';
import { ingestText, LoggerIngest } from '../../../src/services/lambda/logger-ingest.ts';
import type { ServiceAnswer, ServiceCall, ServiceCalls } from '../../../src/services/context.ts';
import { lambdaMigrations } from '../../../src/services/lambda/migrations.ts';
import type { SqlConnection } from '../../../src/store/db.ts';
import { migrate } from '../../../src/store/migrate.ts';
import { all, first, run } from '../../../src/store/sql-work.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';
import { asUser, startTestService, type TestService, jsonCaller } from '../../helpers/service.ts';
import { startTestPlatform } from '../../helpers/platform.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 5_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() - started > timeoutMs) throw new Error(`not reached in ${timeoutMs} ms: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Pino output as objects, to look at the warnings a service logs. */
function capturedLogger(): { logger: pino.Logger; entries: Record<string, unknown>[] } {
  const entries: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line.trim() !== '') entries.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'warn' }, stream), entries };
}

// The history through the service's routes. Batches are due only a minute after a run here, so
// every read below also shows that a caller sees its own invocations at once (README: Invocation
// history and logs).
describe('lambda invocation history', () => {
  const KEEP = 5;
  let service: TestService;
  before(async () => {
    service = await startTestService(lambdaServiceWith({ timeoutMs: 1000, prewarm: 1 }, {}, { flushMs: 60_000 }), {
      lambdaInvocationHistory: KEEP,
    });
  });
  after(async () => {
    await service.close();
  });

  const ada = asUser('user-ada');
  const bob = asUser('user-bob');
  const call = (...args: Parameters<ReturnType<typeof jsonCaller>>) => jsonCaller(service.app)(...args);
  const create = async (name: string, code: string, headers = ada) => {
    const res = await call('POST', '/api/v0/lambdas', headers, { name, code });
    assert.equal(res.statusCode, 201, res.body);
    return res.json<{ id: string; path: string }>();
  };
  const history = async (id: string, query = '', headers = ada): Promise<InvocationItem[]> => {
    const res = await call('GET', `/api/v0/lambdas/${id}/invocations${query}`, headers);
    assert.equal(res.statusCode, 200, res.body);
    return res.json<{ invocations: InvocationItem[] }>().invocations;
  };
  const rowsOf = (lambdaId: string) =>
    service.store.sql.database.read(() =>
      all<{ id: string }>('select id from lambda_invocations where lambda_id = ? order by seq', lambdaId),
    );

  it('records a message or line holding NUL on either store (PostgreSQL text cannot hold one)', async () => {
    const l = await create('nul', 'export default () => { console.log("a\\u0000b"); throw new Error("x\\u0000y") }');
    assert.equal((await call('GET', `/run/${l.id}`)).statusCode, 500);
    const [entry] = await history(l.id);
    assert.deepEqual(entry?.error, { code: 'lambda_error', message: 'x\ufffdy' });
    assert.deepEqual(entry?.logs, [{ level: 'log', message: 'a\u0000b' }]);
  });

  it('records a test run with its status, console lines and counts', async () => {
    const l = await create(
      'talker',
      'export default (req) => { console.log("got", req.body.n); console.error("careful"); return { n: req.body.n } }',
    );
    const before = Date.now();
    assert.equal((await call('POST', `/api/v0/lambdas/${l.id}/invoke`, ada, { body: { n: 7 } })).statusCode, 200);
    const [entry, ...rest] = await history(l.id);
    assert.deepEqual(rest, []);
    assert.ok(entry);
    assert.match(entry.id, UUID);
    assert.match(entry.started_at, RFC3339);
    assert.ok(Math.abs(Date.parse(entry.started_at) - before) < 5_000);
    assert.equal(typeof entry.duration_ms, 'number');
    assert.ok(entry.duration_ms >= 0);
    assert.deepEqual(
      { ...entry, id: 'x', started_at: 'x', duration_ms: 0 },
      {
        id: 'x',
        lambda_id: l.id,
        started_at: 'x',
        duration_ms: 0,
        trigger: 'invoke',
        status: 200,
        error: null,
        logs: [
          { level: 'log', message: 'got 7' },
          { level: 'error', message: 'careful' },
        ],
        fetches: 0,
        bindings: 0,
      },
    );
  });

  it('records every trigger with the status answered, newest first', async () => {
    const owner = asUser('user-triggers');
    const l = await create(
      'answers',
      'export default (req) => req.query.status ? new Response("made", { status: Number(req.query.status) }) : "ok"',
      owner,
    );
    assert.equal((await call('GET', `/run/${l.id}`)).statusCode, 200);
    assert.equal((await call('GET', `/api/v0/run/${l.id}?status=201`, owner)).statusCode, 201);
    assert.equal((await call('GET', `/mux/user-triggers${l.path}?status=404`)).statusCode, 404);
    assert.equal((await call('POST', `/api/v0/lambdas/${l.id}/invoke`, owner, {})).statusCode, 200);
    const entries = await history(l.id, '', owner);
    assert.deepEqual(
      entries.map((e) => [e.trigger, e.status, e.error]),
      [
        ['invoke', 200, null],
        ['mux', 404, null],
        ['run', 201, null],
        ['http', 200, null],
      ],
    );
    assert.equal(new Set(entries.map((e) => e.id)).size, 4);
  });

  it('gives the run its trigger as ctx.trigger; a task or cron run the platform starts is recorded as such', async () => {
    const owner = asUser('user-trigger-data');
    const l = await create(
      'trigger',
      'export default (req, ctx) => ({ trigger: ctx.trigger, frozen: Object.isFrozen(ctx.trigger) && (ctx.trigger.labels ? Object.isFrozen(ctx.trigger.labels) : true), header: req.headers["x-stratus-trigger"] ?? null })',
      owner,
    );
    const task = { type: 'task', scheduler_id: 'sched-1', task_id: 'task-1', attempt: 3, labels: ['kind:mail'] };
    const cron = { type: 'cron', scheduled_at: '2026-11-28T12:00:00Z' };
    const asTask = { ...owner, 'x-stratus-trigger': JSON.stringify(task) };
    const asCron = { ...owner, 'x-stratus-trigger': JSON.stringify(cron) };
    const forged = { 'x-stratus-trigger': JSON.stringify(cron) };
    const bodies = [
      await call('POST', `/api/v0/run/${l.id}`, asTask, { some: 'payload' }),
      await call('POST', `/api/v0/run/${l.id}`, asCron),
      // Only a run as the owner may carry one (the gateway strips it on the public port anyway),
      // and a header that is not a trigger the platform makes is no trigger.
      await call('GET', `/run/${l.id}`, forged),
      await call('GET', `/api/v0/run/${l.id}`, { ...owner, 'x-stratus-trigger': '{"type":"task"}' }),
    ].map((res) => {
      assert.equal(res.statusCode, 200, res.body);
      return res.json<{ trigger: unknown; frozen: boolean; header: unknown }>();
    });
    assert.deepEqual(bodies, [
      { trigger: task, frozen: true, header: null },
      { trigger: cron, frozen: true, header: null },
      { trigger: { type: 'http' }, frozen: true, header: null },
      { trigger: { type: 'run' }, frozen: true, header: null },
    ]);
    const entries = await history(l.id, '', owner);
    assert.deepEqual(
      entries.map((e) => e.trigger),
      ['run', 'http', 'cron', 'task'],
    );
  });

  it('records errors: a throw and a timeout, with the lines written before', async () => {
    const throwing = await create(
      'throwing',
      'export default () => { console.log("before"); throw new Error("kaput") }',
    );
    const res = await call('POST', `/run/${throwing.id}`);
    assert.equal(res.statusCode, 500);
    const [thrown] = await history(throwing.id);
    assert.equal(thrown?.trigger, 'http');
    assert.equal(thrown?.status, 500);
    assert.deepEqual(thrown?.error, { code: 'lambda_error', message: 'kaput' });
    assert.deepEqual(thrown?.logs, [{ level: 'log', message: 'before' }]);

    const hanging = await create('hanging', 'export default () => new Promise(() => {})');
    const invoked = await call('POST', `/api/v0/lambdas/${hanging.id}/invoke`, ada, {});
    assert.equal(invoked.json<{ status: number }>().status, 500);
    const [timedOut] = await history(hanging.id);
    assert.equal(timedOut?.trigger, 'invoke');
    assert.equal(timedOut?.status, 500);
    assert.equal(timedOut?.error?.code, 'lambda_timeout');
    assert.match(timedOut?.error?.message ?? '', /wall-clock limit of 1000 ms exceeded/);
    assert.ok((timedOut?.duration_ms ?? 0) >= 900, String(timedOut?.duration_ms));
  });

  it('answers `limit` newest first, from 1 to the kept number; anything else is a 400', async () => {
    const l = await create('counted', 'export default (req) => { console.log(req.query.n); return 1 }');
    for (let n = 1; n <= 3; n++) assert.equal((await call('GET', `/run/${l.id}?n=${n}`)).statusCode, 200);
    const messages = (entries: InvocationItem[]) => entries.map((e) => e.logs[0]?.message);
    assert.deepEqual(messages(await history(l.id)), ['3', '2', '1']);
    assert.deepEqual(messages(await history(l.id, '?limit=2')), ['3', '2']);
    assert.deepEqual(messages(await history(l.id, `?limit=${KEEP}`)), ['3', '2', '1']);
    for (const bad of ['0', String(KEEP + 1), '-1', '1.5', 'x', '', '1e1', '0x2']) {
      const res = await call('GET', `/api/v0/lambdas/${l.id}/invocations?limit=${bad}`, ada);
      assert.equal(res.statusCode, 400, `limit=${bad}: ${res.body}`);
      assert.equal(res.json<{ error: { code: string } }>().error.code, 'validation_error');
    }
  });

  it('keeps the newest LAMBDA_INVOCATION_HISTORY invocations of each lambda', async () => {
    const l = await create('busy', 'export default (req) => { console.log(req.query.n); return 1 }');
    const other = await create('quiet', 'export default () => 1');
    assert.equal((await call('GET', `/run/${other.id}`)).statusCode, 200);
    for (let n = 1; n <= 8; n++) assert.equal((await call('GET', `/run/${l.id}?n=${n}`)).statusCode, 200);
    const entries = await history(l.id, `?limit=${KEEP}`);
    assert.deepEqual(
      entries.map((e) => e.logs[0]?.message),
      ['8', '7', '6', '5', '4'],
    );
    assert.deepEqual(
      (await rowsOf(l.id)).map((r) => r.id),
      entries.map((e) => e.id).reverse(),
      'older rows are deleted, not just left out',
    );
    assert.equal((await rowsOf(other.id)).length, 1, "another lambda's history is untouched");
  });

  it('is the owner’s only: 404 for another user’s lambda or a missing one, 401 anonymous', async () => {
    const l = await create('private', 'export default () => { console.log("secret-ish line"); return 1 }');
    assert.equal((await call('GET', `/run/${l.id}`)).statusCode, 200);
    for (const [url, headers] of [
      [`/api/v0/lambdas/${l.id}/invocations`, bob],
      ['/api/v0/lambdas/no-such-lambda/invocations', ada],
    ] as const) {
      const res = await call('GET', url, headers);
      assert.equal(res.statusCode, 404, url);
      assert.equal(res.json<{ error: { code: string } }>().error.code, 'not_found');
      assert.doesNotMatch(res.body, /secret-ish/);
    }
    for (const headers of [{}, { 'x-gateway-authentication': 'not json' }] as Record<string, string>[]) {
      const res = await call('GET', `/api/v0/lambdas/${l.id}/invocations`, headers);
      assert.equal(res.statusCode, 401);
      assert.equal(res.json<{ error: { code: string } }>().error.code, 'unauthorized');
    }
    // On a project host only the project's lambdas (this one belongs to none).
    assert.equal(
      (await call('GET', `/api/v0/lambdas/${l.id}/invocations`, { ...ada, 'x-project-id': 'proj-1' })).statusCode,
      404,
    );
    assert.equal((await history(l.id)).length, 1);
  });

  it('deletes the history with the lambda, what waits to be written included', async () => {
    const written = await create('written', 'export default () => 1');
    assert.equal((await call('GET', `/run/${written.id}`)).statusCode, 200);
    assert.equal((await history(written.id)).length, 1);
    assert.equal((await rowsOf(written.id)).length, 1);
    // This one's entry still waits in memory when the lambda goes.
    const waiting = await create('waiting', 'export default () => 1');
    assert.equal((await call('GET', `/run/${waiting.id}`)).statusCode, 200);
    for (const l of [written, waiting])
      assert.equal((await call('DELETE', `/api/v0/lambdas/${l.id}`, ada)).statusCode, 200);
    // Another lambda's read writes whatever waits: nothing of the deleted ones may come back.
    const still = await create('still-here', 'export default () => 1');
    assert.equal((await call('GET', `/run/${still.id}`)).statusCode, 200);
    assert.equal((await history(still.id)).length, 1);
    assert.deepEqual(await rowsOf(written.id), []);
    assert.deepEqual(await rowsOf(waiting.id), []);
    assert.equal((await call('GET', `/api/v0/lambdas/${written.id}/invocations`, ada)).statusCode, 404);
  });

  it('lists the route in the OpenAPI document', async () => {
    const doc = (await call('GET', '/openapi.json')).json<{
      paths: Record<string, { get?: { operationId?: string; parameters?: { name: string }[] } }>;
    }>();
    const op = doc.paths['/api/v0/lambdas/{lambda_id}/invocations']?.get;
    assert.equal(op?.operationId, 'listLambdaInvocations');
    assert.deepEqual(op?.parameters?.map((p) => p.name).sort(), ['lambda_id', 'limit']);
  });
});

// The recorder by itself: batches written off the request path, failures dropped.
describe('lambda invocation history: the recorder', () => {
  let database: TestDatabase;
  let connection: SqlConnection;
  before(async () => {
    database = await createTestDatabase();
    connection = await database.connect();
    await migrate(connection.database, [lambdaMigrations]);
    // The lambdas the entries belong to (a batch keeps only entries of existing lambdas).
    await connection.database.write(function* () {
      for (const id of ['lambda-a', 'lambda-b'])
        yield* run(
          `insert into lambda_functions (id, created_timestamp, owner, project_id, name, language, code, method, path)
            values (?, 0, 'user-ada', '', ?, 'javascript', '', 'ANY', ?)`,
          id,
          id,
          `/${id}`,
        );
    });
  });
  after(async () => {
    await connection.close();
    await database.cleanup();
  });

  let next = 0;
  const entry = (lambdaId: string, extra: Partial<InvocationRecord> = {}): InvocationRecord => ({
    id: `inv-${++next}`,
    lambda_id: lambdaId,
    owner: 'user-ada',
    started_at: '2026-01-01T00:00:00Z',
    duration_ms: 1.25,
    trigger: 'http',
    status: 200,
    error_code: null,
    error_message: null,
    logs: [{ level: 'log', message: 'line' }],
    ...extra,
  });
  const countOf = async (lambdaId: string) =>
    Number(
      (
        await connection.database.read(() =>
          first<{ n: number | string }>('select count(*) as n from lambda_invocations where lambda_id = ?', lambdaId),
        )
      )?.n ?? 0,
    );

  it('under a steady stream writes about once per flush delay, not once per write of what came meanwhile', async () => {
    const history = new InvocationHistory(connection, () => assert.fail('no warning expected'), {
      keep: 1000,
      flushMs: 100,
    });
    // Each write of the recorder is one database write (one commit): counted at the connection,
    // and made to take 20 ms, as a commit can on a busy disk, so entries arrive while it writes.
    const database = connection.database;
    const write = database.write.bind(database);
    let writes = 0;
    database.write = async (make) => {
      writes += 1;
      const result = await write(make);
      await new Promise((resolve) => setTimeout(resolve, 20));
      return result;
    };
    try {
      // An entry every 2 ms for 600 ms: six delays' worth.
      const until = Date.now() + 600;
      let recorded = 0;
      while (Date.now() < until) {
        history.record(entry('lambda-a'));
        recorded += 1;
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      await history.close();
      assert.ok(writes <= 12, `${writes} writes for ${recorded} entries in 600 ms with a 100 ms delay`);
      assert.equal(history.waiting, 0);
    } finally {
      database.write = write;
      // The next tests count this lambda's rows from none.
      await database.write(() => run('delete from lambda_invocations where lambda_id = ?', 'lambda-a'));
    }
  });

  it('writes within the flush delay without anyone reading, and at once when a batch is full', async () => {
    const slow = new InvocationHistory(connection, () => assert.fail('no warning expected'), {
      keep: 100,
      flushMs: 100,
    });
    slow.record(entry('lambda-a'));
    slow.record(entry('lambda-a', { fetches: 3, bindings: 2, duration_ms: 0.5 }));
    assert.equal(slow.waiting, 2, 'record only queues');
    assert.equal(await countOf('lambda-a'), 0);
    await until(
      () => countOf('lambda-a'),
      (n) => n === 2,
      2_000,
    );
    const [newest] = await slow.list('lambda-a', 1);
    assert.equal(newest?.fetches, 3);
    assert.equal(newest?.bindings, 2);
    assert.equal(newest?.duration_ms, 0.5);
    await slow.close();

    const full = new InvocationHistory(connection, () => assert.fail('no warning expected'), {
      keep: 100,
      flushMs: 60_000,
      maxBatch: 3,
    });
    for (let i = 0; i < 3; i++) full.record(entry('lambda-b'));
    await until(
      () => countOf('lambda-b'),
      (n) => n === 3,
      2_000,
    );
    // Not full: waits for its delay (or a read, or close).
    full.record(entry('lambda-b'));
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(await countOf('lambda-b'), 3);
    await full.close();
    assert.equal(await countOf('lambda-b'), 4, 'close writes what waits');
  });

  it("lets no more than `keep` of a lambda's entries wait: the newest, written in their order", async () => {
    const history = new InvocationHistory(connection, () => assert.fail('no warning expected'), {
      keep: 3,
      flushMs: 60_000,
    });
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const e = entry('lambda-b');
      ids.push(e.id);
      history.record(e);
    }
    history.record(entry('lambda-a'));
    assert.equal(history.waiting, 4, "lambda-b's three newest and lambda-a's one");
    const listed = await history.list('lambda-b', 3);
    assert.deepEqual(
      listed.map((i) => i.id),
      ids.slice(-3).reverse(),
    );
    await history.close();
  });

  it('records 0 for absent counts and keeps no entry of a lambda that does not exist', async () => {
    const history = new InvocationHistory(connection, () => assert.fail('no warning expected'), { keep: 100 });
    history.record(entry('lambda-gone'));
    history.record(entry('lambda-a', { fetches: undefined, bindings: undefined }));
    const [newest] = await history.list('lambda-a', 1);
    assert.equal(newest?.fetches, 0);
    assert.equal(newest?.bindings, 0);
    assert.equal(await countOf('lambda-gone'), 0);
    await history.close();
  });

  it('reports a failed batch without its lines or messages, drops it, and goes on', async () => {
    const warnings: { context: Record<string, unknown>; message: string }[] = [];
    let failing = true;
    // The same database, whose writes fail while `failing` holds.
    const flaky = new Proxy(connection.database, {
      get(target, property) {
        if (property === 'write' && failing) return () => Promise.reject(new Error('disk I/O error'));
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const history = new InvocationHistory(
      { ...connection, database: flaky },
      (context, message) => warnings.push({ context, message }),
      { keep: 100 },
    );
    const before = await countOf('lambda-a');
    history.record(
      entry('lambda-a', {
        error_code: 'lambda_error',
        error_message: 'token sk-live-123',
        logs: [{ level: 'log', message: 'password hunter2' }],
      }),
    );
    await history.flush();
    assert.equal(history.waiting, 0, 'dropped, not retried');
    assert.equal(warnings.length, 1);
    const text = JSON.stringify(warnings);
    assert.match(text, /disk I\/O error/);
    assert.doesNotMatch(text, /hunter2|sk-live/);
    failing = false;
    history.record(entry('lambda-a'));
    await history.flush();
    assert.equal(await countOf('lambda-a'), before + 1);
    await history.close();
  });
});

// The logger ingestion by itself, on a stand-in for the platform's service calls.
describe('lambda console lines: the ingestion queue', () => {
  const answer = (status: number): ServiceAnswer => ({ status, headers: [], body: Buffer.from('{}') });
  const stub = () => {
    const calls: { service: string; call: ServiceCall; settle: (answer: ServiceAnswer | Error) => void }[] = [];
    const services: ServiceCalls = {
      call: (service, call) =>
        new Promise((resolve, reject) =>
          calls.push({ service, call, settle: (a) => (a instanceof Error ? reject(a) : resolve(a)) }),
        ),
    };
    return { calls, services };
  };
  const tick = () => new Promise((resolve) => setTimeout(resolve, 10));
  const lines = (invocationId: string, message: string) => ({
    invocationId,
    lambdaId: 'lambda-1',
    owner: 'user-ada',
    loggerId: 'logger-1',
    logs: [{ level: 'log', message }],
  });

  it('never waits: one call at a time per lambda and logger, the lines that came meanwhile together and in order', async () => {
    const { calls, services } = stub();
    const ingest = new LoggerIngest(services, () => assert.fail('no warning expected'));
    ingest.send(lines('inv-1', 'first'));
    assert.equal(calls.length, 0, 'send only queues');
    await tick();
    assert.equal(calls.length, 1);
    const [one] = calls;
    assert.equal(one?.service, 'logs');
    assert.deepEqual(
      { ...one?.call, signal: undefined },
      {
        method: 'POST',
        path: '/v1/loggers/logger-1/ingest',
        identity: { user: { id: 'user-ada' } },
        headers: { 'content-type': 'text/plain; charset=utf-8' },
        body: 'inv-1 log first\n',
        signal: undefined,
        maxBodyBytes: 64 * 1024,
      },
    );
    // Never answered yet: later lines wait for it, and go in one call.
    ingest.send(lines('inv-2', 'second'));
    ingest.send(lines('inv-3', 'third\r\nfourth'));
    await tick();
    assert.equal(calls.length, 1);
    one?.settle(answer(200));
    await tick();
    assert.equal(calls.length, 2);
    assert.equal(calls[1]?.call.body, 'inv-2 log second\ninv-3 log third\ninv-3 log fourth\n');
    calls[1]?.settle(answer(200));
    await ingest.flush();
  });

  it('reports a refused or failed call with the lambda, the logger and the status, never the lines, at most once a while', async () => {
    const { calls, services } = stub();
    const warnings: { context: Record<string, unknown>; message: string }[] = [];
    const ingest = new LoggerIngest(services, (context, message) => warnings.push({ context, message }), {
      warnEveryMs: 60_000,
    });
    ingest.send(lines('inv-1', 'the secret is hunter2'));
    await tick();
    calls[0]?.settle(answer(404));
    await ingest.flush();
    assert.deepEqual(
      warnings.map((w) => w.context),
      [{ lambda_id: 'lambda-1', logger_id: 'logger-1', status: 404, suppressed: 0 }],
    );
    ingest.send(lines('inv-2', 'hunter2 again'));
    await tick();
    calls[1]?.settle(new Error('the logs service could not be reached'));
    await ingest.flush();
    assert.equal(warnings.length, 1, 'the next failure within the minute is only counted');
    assert.doesNotMatch(JSON.stringify(warnings), /hunter2/);
  });

  it('does nothing without the platform service calls (a lambda service built alone)', async () => {
    const ingest = new LoggerIngest(undefined, () => assert.fail('no warning expected'));
    ingest.send(lines('inv-1', 'x'));
    await ingest.flush();
  });
});

/** The two services of this test as one platform in this process (the gateway's internal port). */
interface Platform {
  platform: RunningPlatform;
  database: TestDatabase;
  warnings: Record<string, unknown>[];
  call(options: { method?: string; path: string; host: string; user?: string; body?: string }): Promise<{
    status: number;
    text: string;
    json<T>(): T;
  }>;
}

async function startLambdaAndLogs(overrides: Partial<Settings> = {}): Promise<Platform> {
  const { logger, entries } = capturedLogger();
  const { platform, database, callInternal } = await startTestPlatform(
    { services: ['lambda', 'logs'], ...overrides },
    logger,
  );
  return {
    platform,
    database,
    warnings: entries,
    call: ({ method, path, host, user, body }) =>
      callInternal({
        method: method ?? 'GET',
        path,
        host,
        headers: {
          ...(user ? asUser(user) : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body,
      }),
  };
}

// Console lines into a logger: the lambda service calls the logs service as the lambda's owner.
describe('lambda console lines ingested into a logger', () => {
  let p: Platform;
  before(async () => {
    p = await startLambdaAndLogs();
  });
  after(async () => {
    await p.platform.close();
    await p.database.cleanup();
  });

  const lambdaHost = 'lambda.localhost';
  const logsHost = 'logs.localhost';
  const createLogger = async (user: string, name: string) => {
    const res = await p.call({
      method: 'POST',
      path: '/v1/loggers',
      host: logsHost,
      user,
      body: JSON.stringify({ name }),
    });
    assert.equal(res.status, 201, res.text);
    return res.json<{ id: string }>().id;
  };
  const createLambda = async (user: string, name: string, code: string, loggerId?: string) => {
    const res = await p.call({
      method: 'POST',
      path: '/api/v0/lambdas',
      host: lambdaHost,
      user,
      body: JSON.stringify({ name, code, ...(loggerId === undefined ? {} : { logger_id: loggerId }) }),
    });
    assert.equal(res.status, 201, res.text);
    return res.json<{ id: string }>().id;
  };
  const lines = async (loggerId: string, user: string) => {
    const res = await p.call({ path: `/v1/loggers/${loggerId}/filter`, host: logsHost, user });
    assert.equal(res.status, 200, res.text);
    return res.text;
  };
  const invocations = async (lambdaId: string, user: string) => {
    const res = await p.call({ path: `/api/v0/lambdas/${lambdaId}/invocations`, host: lambdaHost, user });
    assert.equal(res.status, 200, res.text);
    return res.json<{ invocations: InvocationItem[] }>().invocations;
  };

  it('ingests each line as `<invocation id> <level> <message>`, a line per line of a message', async () => {
    const loggerId = await createLogger('user-ada', 'lambda-lines');
    const lambdaId = await createLambda(
      'user-ada',
      'logged',
      'export default (req) => { console.log("hello", req.query.n); console.warn("two\\nlines"); return 1 }',
      loggerId,
    );
    for (const n of ['1', '2']) {
      const res = await p.call({ path: `/run/${lambdaId}?n=${n}`, host: lambdaHost });
      assert.equal(res.status, 200, res.text);
    }
    const [second, first] = await invocations(lambdaId, 'user-ada');
    assert.ok(first && second);
    const expected =
      `${first.id} log hello 1\n${first.id} warn two\n${first.id} warn lines\n` +
      `${second.id} log hello 2\n${second.id} warn two\n${second.id} warn lines\n`;
    assert.equal(
      await until(
        () => lines(loggerId, 'user-ada'),
        (text) => text.length >= expected.length,
      ),
      expected,
    );
    assert.equal(ingestText(first.id, first.logs), expected.slice(0, expected.length / 2));
    assert.deepEqual(p.warnings, []);
  });

  it('sends nothing for a run without console lines or a lambda without a logger', async () => {
    const loggerId = await createLogger('user-quiet', 'quiet');
    const silent = await createLambda('user-quiet', 'silent', 'export default () => 1', loggerId);
    const unlogged = await createLambda(
      'user-quiet',
      'unlogged',
      'export default () => { console.log("x"); return 1 }',
    );
    for (const id of [silent, unlogged])
      assert.equal((await p.call({ path: `/run/${id}`, host: lambdaHost })).status, 200);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(await lines(loggerId, 'user-quiet'), '');
    assert.equal((await invocations(unlogged, 'user-quiet'))[0]?.logs[0]?.message, 'x');
  });

  it("ingests as the lambda's owner: a logger gone since refuses, and the warning names no line", async () => {
    const loggerId = await createLogger('user-bob', 'short-lived');
    const lambdaId = await createLambda(
      'user-bob',
      'misdirected',
      'export default () => { console.log("private words"); return 1 }',
      loggerId,
    );
    const deleted = await p.call({
      method: 'DELETE',
      path: `/v1/loggers/${loggerId}`,
      host: logsHost,
      user: 'user-bob',
    });
    assert.equal(deleted.status, 204, deleted.text);
    assert.equal((await p.call({ path: `/run/${lambdaId}`, host: lambdaHost })).status, 200);
    const warning = await until(
      async () => p.warnings.find((w) => w.lambda_id === lambdaId),
      (w) => w !== undefined,
    );
    assert.equal(warning?.logger_id, loggerId);
    assert.equal(warning?.status, 404);
    assert.doesNotMatch(JSON.stringify(p.warnings), /private words/);
  });
});

// Reading right after a run is covered above; this shows the batch is written on its own.
describe('lambda invocation history: written without a read', () => {
  let p: Platform;
  before(async () => {
    p = await startLambdaAndLogs({ lambdaInvocationHistory: 3 });
  });
  after(async () => {
    await p.platform.close();
    await p.database.cleanup();
  });

  it('appears in storage within about half a second', async () => {
    const res = await p.call({
      method: 'POST',
      path: '/api/v0/lambdas',
      host: 'lambda.localhost',
      user: 'user-ada',
      body: JSON.stringify({ name: 'soon', code: 'export default () => 1' }),
    });
    const { id } = res.json<{ id: string }>();
    for (let i = 0; i < 5; i++)
      assert.equal((await p.call({ path: `/run/${id}`, host: 'lambda.localhost' })).status, 200);
    const started = Date.now();
    const count = () =>
      p.platform.store.sql.database.read(() =>
        first<{ n: number | string }>('select count(*) as n from lambda_invocations where lambda_id = ?', id),
      );
    await until(count, (row) => Number(row?.n) === 3, 3_000);
    assert.ok(Date.now() - started < 2_000);
    // A direct write, to check the trim works on rows of any instance.
    await p.platform.store.sql.database.write(() =>
      run(
        `insert into lambda_invocations (id, lambda_id, owner, started_at, duration_ms, trigger, status, logs, fetches, bindings)
          values ('other-instance', ?, 'user-ada', '2026-01-01T00:00:00Z', 1, 'http', 200, '[]', 0, 0)`,
        id,
      ),
    );
    assert.equal((await p.call({ path: `/run/${id}`, host: 'lambda.localhost' })).status, 200);
    const listed = (
      await p.call({ path: `/api/v0/lambdas/${id}/invocations`, host: 'lambda.localhost', user: 'user-ada' })
    ).json<{ invocations: InvocationItem[] }>().invocations;
    assert.equal(listed.length, 3);
    assert.equal(listed[1]?.id, 'other-instance');
    assert.equal(Number((await count())?.n), 3);
  });
});
