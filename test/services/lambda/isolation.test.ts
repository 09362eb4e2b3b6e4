import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { lambdaServiceWith } from '../../../src/services/lambda/index.ts';
import { LambdaRuntime } from '../../../src/services/lambda/runtime/sandbox.ts';
import type { InvokeResult, LambdaRequest } from '../../../src/services/lambda/runtime/sandbox.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';

// Issue 17, items D and E: one owner cannot take the whole isolate pool, and lambdas with the same
// code never share module state.

const req: LambdaRequest = { method: 'GET', path: '/x', query: {}, headers: {} };
const COUNTER = 'let n = 0; export default () => ++n';

function json(r: InvokeResult): unknown {
  assert.equal(r.kind, 'json', JSON.stringify(r));
  return r.kind === 'json' ? JSON.parse(r.json) : undefined;
}

describe('lambda runtime: module state belongs to one lambda', () => {
  it('keeps warm module state per lambda id, never across lambdas with identical code', async () => {
    // One isolate, so every call lands in the same one.
    const runtime = new LambdaRuntime({ maxIsolates: 1, prewarm: 1, timeoutMs: 2000 });
    try {
      assert.equal(json(await runtime.invoke(COUNTER, req, { contextKey: 'lambda-a' })), 1);
      assert.equal(json(await runtime.invoke(COUNTER, req, { contextKey: 'lambda-a' })), 2);
      assert.equal(json(await runtime.invoke(COUNTER, req, { contextKey: 'lambda-b' })), 1);
      assert.equal(json(await runtime.invoke(COUNTER, req, { contextKey: 'lambda-a' })), 3);
      // No key: a fresh context, shared with nobody.
      assert.equal(json(await runtime.invoke(COUNTER, req)), 1);
      assert.equal(json(await runtime.invoke(COUNTER, req)), 1);
      // A new code version of the same lambda starts over.
      assert.equal(json(await runtime.invoke(`${COUNTER}; // v2`, req, { contextKey: 'lambda-a' })), 1);
    } finally {
      runtime.close();
    }
  });
});

describe('lambda service: isolation between owners', () => {
  let service: TestService;
  const greedy = asUser('user-greedy');
  const other = asUser('user-other');
  before(async () => {
    // A pool of 4 isolates, at most 2 running per owner (and 2 waiting).
    service = await startTestService(
      lambdaServiceWith({ timeoutMs: 2000, memoryLimitMiB: 64, maxIsolates: 4, prewarm: 1 }),
      { lambdaOwnerConcurrency: 2 },
    );
  });
  after(async () => {
    await service.close();
  });

  const create = async (headers: Record<string, string>, name: string, code: string): Promise<string> => {
    const res = await service.app.inject({
      method: 'POST',
      url: '/api/v0/lambdas',
      headers: { ...headers, 'content-type': 'application/json' },
      payload: JSON.stringify({ name, code }),
    });
    assert.equal(res.statusCode, 201, res.body);
    return res.json<{ id: string }>().id;
  };
  const run = (id: string): Promise<LightMyRequestResponse> => service.app.inject({ method: 'GET', url: `/run/${id}` });
  const codeOf = (res: LightMyRequestResponse) => res.json<{ error?: { code: string } }>().error?.code;

  it('never shares module state between two owners whose lambdas have the same code', async () => {
    const a = await create(greedy, 'counter', COUNTER);
    const b = await create(other, 'counter', COUNTER);
    assert.equal((await run(a)).json(), 1);
    assert.equal((await run(b)).json(), 1);
    assert.equal((await run(a)).json(), 2);
    assert.equal((await run(b)).json(), 2);
  });

  it(
    "serves another owner's lambda while one owner's runaway lambdas fill its share of the pool",
    { timeout: 30_000 },
    async () => {
      const loop = await create(greedy, 'loop', 'while (true) {}');
      const quick = await create(other, 'quick', 'export default () => "quick"');
      const outcomes: string[] = [];
      const runaway = Array.from({ length: 6 }, () =>
        run(loop).then((res) => {
          outcomes.push(`${res.statusCode} ${codeOf(res)}`);
          return res;
        }),
      );
      // Wait (bounded) until the greedy owner's loops are running.
      const until = Date.now() + 5000;
      for (;;) {
        const ongoing = (await service.app.inject({ method: 'GET', url: '/ongoing', headers: greedy })).json<
          unknown[]
        >();
        if (ongoing.length >= 2 || Date.now() > until) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      const res = await run(quick);
      assert.equal(res.json(), 'quick');
      // It finished while every admitted runaway invocation was still running.
      assert.equal(
        outcomes.filter((o) => o.includes('lambda_timeout')).length,
        0,
        `finished after runaway ones timed out: ${outcomes.join(', ')}`,
      );
      const all = await Promise.all(runaway);
      // 2 ran, 2 waited for them and ran next, 2 were refused at once with a clear 429.
      assert.deepEqual(outcomes.slice().sort(), [
        '429 too_many_requests',
        '429 too_many_requests',
        '500 lambda_timeout',
        '500 lambda_timeout',
        '500 lambda_timeout',
        '500 lambda_timeout',
      ]);
      const refused = all.find((r) => r.statusCode === 429)!;
      assert.ok(Number(refused.headers['retry-after']) >= 1);
      assert.match(refused.json<{ error: { message: string } }>().error.message, /2 at once/);
      // Afterwards the owner's lambdas run again.
      assert.equal((await run(await create(greedy, 'fine', '"fine"'))).json(), 'fine');
    },
  );
});
