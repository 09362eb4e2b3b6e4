import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LambdaBridges } from '../../../src/services/lambda/bridge.ts';
import { EgressPolicy, egressAgent } from '../../../src/core/egress.ts';
import { DEFAULT_FETCH_LIMITS } from '../../../src/services/lambda/fetcher.ts';
import { LambdaRuntime } from '../../../src/services/lambda/runtime/sandbox.ts';
import type { LambdaRequest } from '../../../src/services/lambda/runtime/sandbox.ts';
import type { ServiceCall, ServiceCalls } from '../../../src/services/context.ts';

// The host side of ctx.platform.request: a path that could leave its service is refused inside the
// lambda before any service is called (the rule is the service calls' own, src/services/context.ts).

const runtime = new LambdaRuntime({ timeoutMs: 3000, maxIsolates: 1, prewarm: 0 });
const policy = new EgressPolicy({ allow: '', ownPorts: [] });
const agent = egressAgent(policy);
after(async () => {
  runtime.close();
  await agent.close();
});
const req: LambdaRequest = { method: 'GET', path: '/', query: {}, headers: {} };

describe('lambda bindings: the path of ctx.platform.request', () => {
  it('refuses `//host`, a backslash and a control character with a TypeError, calling nothing', async () => {
    const called: ServiceCall[] = [];
    const services: ServiceCalls = {
      call: async (_service, call) => {
        called.push(call);
        return { status: 200, headers: [['content-type', 'application/json']], body: Buffer.from('{"entries":{}}') };
      },
    };
    const bridges = new LambdaBridges({ policy, dispatcher: agent, limits: DEFAULT_FETCH_LIMITS, services });
    const paths = ['//evil.example/x', '/\\evil.example/x', '/a\\b', '/x\n', '/v1/config'];
    const host = bridges.open({ owner: 'user-ada', projectId: '' });
    const result = await runtime.invoke(
      `export default async (req, ctx) => {
        const out = [];
        for (const path of ${JSON.stringify(paths)}) {
          try { out.push((await ctx.platform.request('config', path)).status); }
          catch (e) { out.push(e instanceof TypeError ? e.message : 'not a TypeError: ' + e); }
        }
        return out;
      }`,
      req,
      { host },
    );
    assert.equal(result.kind, 'json', JSON.stringify(result));
    const rule = 'platform.request: the path must start with a single "/" and hold no backslash or control character';
    assert.deepEqual(JSON.parse(result.kind === 'json' ? result.json : 'null'), [rule, rule, rule, rule, 200]);
    // Only the good path reached the service and counted as a binding call.
    assert.deepEqual(
      called.map((c) => c.path),
      ['/v1/config'],
    );
    assert.equal(host.bindings, 1);
  });
});

describe('lambda bindings: kv set', () => {
  /** Runs `ctx.platform.kv('c').set('k', 1)` against services answering `answers` in turn. */
  async function set(answers: [number, unknown][]): Promise<{ outcome: unknown; calls: string[] }> {
    const calls: string[] = [];
    const services: ServiceCalls = {
      call: async (service, call) => {
        calls.push(`${service} ${call.method} ${call.path} ${String(call.body)}`);
        const [status, body] = answers.shift() ?? [500, { error: { code: 'unexpected', message: 'no answer left' } }];
        return { status, headers: [['content-type', 'application/json']], body: Buffer.from(JSON.stringify(body)) };
      },
    };
    const bridges = new LambdaBridges({ policy, dispatcher: agent, limits: DEFAULT_FETCH_LIMITS, services });
    const result = await runtime.invoke(
      `export default async (req, ctx) => {
        try { return { value: await ctx.platform.kv('c').set('k', 1) }; }
        catch (e) { return { error: e.name + ': ' + e.message, status: e.status, code: e.code }; }
      }`,
      req,
      { host: bridges.open({ owner: 'user-ada', projectId: '' }) },
    );
    assert.equal(result.kind, 'json', JSON.stringify(result));
    return { outcome: JSON.parse(result.kind === 'json' ? result.json : 'null'), calls };
  }
  const write = 'kv POST /v1/collections/c/keys/k {"value":1}';
  const missing = { error: { code: 'missing_collection', message: 'collection does not exist' } };

  it('makes a missing collection on the first write, then writes again', async () => {
    assert.deepEqual(
      await set([
        [404, missing],
        [201, { name: 'c' }],
        [200, { version: 1 }],
      ]),
      {
        outcome: { value: { version: 1 } },
        calls: [write, 'kv POST /v1/collections {"name":"c"}', write],
      },
    );
  });

  it('throws any other refusal as it came, a 404 of another code or a missing_collection of another status', async () => {
    assert.deepEqual(await set([[404, { error: { code: 'not_found', message: 'gone' } }]]), {
      outcome: {
        error: 'PlatformError: kv POST /v1/collections/c/keys/k: 404 not_found: gone',
        status: 404,
        code: 'not_found',
      },
      calls: [write],
    });
    assert.deepEqual(await set([[400, missing]]), {
      outcome: {
        error: 'PlatformError: kv POST /v1/collections/c/keys/k: 400 missing_collection: collection does not exist',
        status: 400,
        code: 'missing_collection',
      },
      calls: [write],
    });
    assert.deepEqual(
      await set([
        [404, missing],
        [403, { error: { code: 'forbidden', message: 'no' } }],
      ]),
      {
        outcome: { error: 'PlatformError: kv POST /v1/collections: 403 forbidden: no', status: 403, code: 'forbidden' },
        calls: [write, 'kv POST /v1/collections {"name":"c"}'],
      },
    );
  });
});
