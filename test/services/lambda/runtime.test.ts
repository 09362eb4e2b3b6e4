import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LambdaRuntime } from '../../../src/services/lambda/runtime/sandbox.ts';
import type { InvokeResult, LambdaRequest } from '../../../src/services/lambda/runtime/sandbox.ts';

const runtime = new LambdaRuntime({ timeoutMs: 500, memoryLimitMiB: 32, prewarm: 1 });
after(() => runtime.close());

const req = (over: Partial<LambdaRequest> = {}): LambdaRequest => ({
  method: 'GET',
  path: '/hello-world',
  query: {},
  headers: {},
  ...over,
});

function json(r: InvokeResult): unknown {
  assert.equal(r.kind, 'json', JSON.stringify(r));
  return r.kind === 'json' ? JSON.parse(r.json) : undefined;
}

function failure(r: InvokeResult): { code: string; message: string } {
  assert.equal(r.kind, 'error', JSON.stringify(r));
  return r.kind === 'error' ? { code: r.code, message: r.message } : { code: '', message: '' };
}

describe('lambda runtime: code forms', () => {
  it('runs the documented hello-world module and returns the whole value', async () => {
    const code = 'export default (req) => ({ body: { message: "Hello, World!", method: req.method, path: req.path } })';
    assert.deepEqual(json(await runtime.invoke(code, req())), {
      body: { message: 'Hello, World!', method: 'GET', path: '/hello-world' },
    });
  });

  it('runs the documented webhook handler with a JSON body', async () => {
    const code = 'export default (req) => ({ body: { processed: true, event: req.body.event } })';
    const r = await runtime.invoke(code, req({ method: 'POST', body: { event: 'payment_received', amount: 49.99 } }));
    assert.deepEqual(json(r), { body: { processed: true, event: 'payment_received' } });
  });

  it('awaits async handlers', async () => {
    const code = 'export default async (req) => { await null; return { q: req.query.a } }';
    assert.deepEqual(json(await runtime.invoke(code, req({ query: { a: ['1', '2'] } }))), { q: ['1', '2'] });
  });

  it('gives plain scripts req, body, query, headers and write', async () => {
    const r = await runtime.invoke(
      'write("Hello "); write(body.n, " ", headers["x-a"] === req.headers["x-a"]); write(query.q)',
      req({ body: { n: 1 }, headers: { 'x-a': 'b' }, query: { q: '!' } }),
    );
    assert.deepEqual(r, { kind: 'text', text: 'Hello 1!', logs: [] });
  });

  it('uses the completion value of a script that never writes, and null for undefined', async () => {
    assert.equal(json(await runtime.invoke('({ sum: 1 + 2 })', req())) instanceof Object, true);
    assert.deepEqual(json(await runtime.invoke('({ sum: 1 + 2 })', req())), { sum: 3 });
    assert.equal(json(await runtime.invoke('export default () => undefined', req())), null);
  });

  it('passes a returned Response through', async () => {
    const r = await runtime.invoke(
      'export default () => new Response("tea", { status: 418, headers: { "X-A": "b" } })',
      req(),
    );
    assert.equal(r.kind, 'response');
    if (r.kind !== 'response') return;
    assert.equal(r.status, 418);
    assert.equal(r.body, 'tea');
    assert.deepEqual(Object.fromEntries(r.headers), { 'x-a': 'b', 'content-type': 'text/plain; charset=utf-8' });
    const j = await runtime.invoke('export default () => Response.json({ a: 1 }, { status: 201 })', req());
    assert.equal(j.kind === 'response' && j.status === 201 && j.body === '{"a":1}', true);
  });

  it('captures console output with the invocation', async () => {
    const r = await runtime.invoke(
      'export default () => { console.log("hi", { a: 1 }); console.error("bad"); return 1 }',
      req(),
    );
    assert.deepEqual(r.logs, [
      { level: 'log', message: 'hi {"a":1}' },
      { level: 'error', message: 'bad' },
    ]);
  });

  it('starts every warm module call with empty output', async () => {
    const code = 'let calls = 0; export default () => { calls++; console.log("call"); return calls > 0 }';
    for (let i = 0; i < 3; i++) {
      const r = await runtime.invoke(code, req(), { contextKey: 'warm-logger' });
      assert.deepEqual(r, { kind: 'json', json: 'true', logs: [{ level: 'log', message: 'call' }] });
    }
    const writer = 'export default () => { write("a"); }';
    assert.deepEqual(await runtime.invoke(writer, req(), { contextKey: 'warm-writer' }), {
      kind: 'text',
      text: 'a',
      logs: [],
    });
    assert.deepEqual(await runtime.invoke(writer, req(), { contextKey: 'warm-writer' }), {
      kind: 'text',
      text: 'a',
      logs: [],
    });
  });

  it('takes new code on the next call and keeps no state between calls', async () => {
    assert.deepEqual(json(await runtime.invoke('export default () => ({ v: 1 })', req())), { v: 1 });
    assert.deepEqual(json(await runtime.invoke('export default () => ({ v: 2 })', req())), { v: 2 });
    const counter = 'globalThis.n = (globalThis.n || 0) + 1; n';
    assert.equal(json(await runtime.invoke(counter, req())), 1);
    assert.equal(json(await runtime.invoke(counter, req())), 1);
  });
});

describe('lambda runtime: pool', () => {
  it('queues calls when every isolate is busy and serves them all', async () => {
    const small = new LambdaRuntime({ maxIsolates: 1, prewarm: 0, timeoutMs: 1000 });
    try {
      const results = await Promise.all(
        Array.from({ length: 5 }, (_, i) => small.invoke(`export default () => ${i}`, req())),
      );
      assert.deepEqual(results.map(json), [0, 1, 2, 3, 4]);
      assert.equal(small.idleCount, 1);
    } finally {
      small.close();
    }
  });

  it('retires an isolate holding warm module contexts and serves the next calls from a fresh one', async () => {
    const small = new LambdaRuntime({ maxIsolates: 1, prewarm: 0, timeoutMs: 1000, maxUsesPerIsolate: 3 });
    const counter = 'let n = 0; export default () => ++n';
    try {
      const counts = [];
      for (let i = 0; i < 7; i++) counts.push(json(await small.invoke(counter, req(), { contextKey: 'counter' })));
      // Module state lives as long as its isolate: three calls each, then a new isolate starts at 1.
      assert.deepEqual(counts, [1, 2, 3, 1, 2, 3, 1]);
      // A warm call after the retirements still answers through its context's entry point.
      assert.equal(json(await small.invoke('export default () => "other"', req(), { contextKey: 'other' })), 'other');
    } finally {
      small.close();
    }
  });

  it('disposes the isolates a burst left idle beyond the prewarmed ones, and starts them again on demand', async () => {
    // Retirement long beside an isolate's start on a loaded machine, so the burst's are all still there.
    const small = new LambdaRuntime({ maxIsolates: 4, prewarm: 1, timeoutMs: 1000, idleRetireMs: 1_000 });
    const slow = 'export default async () => { let x = 0; for (let i = 0; i < 2e6; i++) x += i; return x > 0; }';
    try {
      const burst = await Promise.all(Array.from({ length: 4 }, () => small.invoke(slow, req())));
      assert.deepEqual(burst.map(json), [true, true, true, true]);
      assert.deepEqual(small.poolState(), { idle: 4, busy: 0, waiting: 0 });
      await new Promise((resolve) => setTimeout(resolve, 1_800));
      // The prewarmed count stays warm however long the pool waits.
      assert.deepEqual(small.poolState(), { idle: 1, busy: 0, waiting: 0 });
      const again = await Promise.all(Array.from({ length: 3 }, () => small.invoke(slow, req())));
      assert.deepEqual(again.map(json), [true, true, true]);
      assert.equal(small.idleCount, 3);
    } finally {
      small.close();
    }
  });

  it('keeps the isolates a steady load keeps using', async () => {
    const small = new LambdaRuntime({ maxIsolates: 4, prewarm: 1, timeoutMs: 1000, idleRetireMs: 600 });
    try {
      await Promise.all(Array.from({ length: 2 }, () => small.invoke('export default () => 1', req())));
      // Twice the retirement time of calls 20 ms apart.
      const until = Date.now() + 1_200;
      while (Date.now() < until) {
        await Promise.all(Array.from({ length: 2 }, () => small.invoke('export default () => 1', req())));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.equal(small.idleCount, 2);
    } finally {
      small.close();
    }
  });
});

describe('lambda runtime: failures', () => {
  const cases: [string, string, RegExp][] = [
    ['a throw', 'export default () => { throw new Error("boom") }', /^boom$/],
    ['a rejection', 'export default async () => { throw new Error("later") }', /^later$/],
    ['a throwing script', 'throw new TypeError("nope")', /^nope$/],
    ['a default export that is not a function', 'export default 5', /not a function/],
    ['a syntax error', 'export default (', /Unexpected/],
    ['a cycle', 'export default () => { const a = {}; a.a = a; return a }', /JSON/],
    ['a BigInt', 'export default () => 1n', /BigInt/],
  ];
  for (const [name, code, message] of cases) {
    it(`reports ${name} as lambda_error`, async () => {
      const f = failure(await runtime.invoke(code, req()));
      assert.equal(f.code, 'lambda_error');
      assert.match(f.message, message);
    });
  }

  it('stops an endless loop at the wall-clock limit while the event loop keeps serving', async () => {
    const server = createServer((_q, s) => s.end('ok'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const port = (server.address() as AddressInfo).port;
      const started = Date.now();
      const loop = runtime.invoke('while (true) {}', req());
      const health = await fetch(`http://127.0.0.1:${port}/`);
      assert.equal(await health.text(), 'ok');
      assert.ok(Date.now() - started < 400, 'health answered while the loop runs');
      const f = failure(await loop);
      assert.equal(f.code, 'lambda_timeout');
      assert.match(f.message, /500 ms/);
    } finally {
      server.close();
    }
  });

  it('stops a promise that never settles at the wall-clock limit', async () => {
    assert.equal(
      failure(await runtime.invoke('export default () => new Promise(() => {})', req())).code,
      'lambda_timeout',
    );
  });

  it('stops a memory bomb at the memory limit and keeps working afterwards', async () => {
    // A wall-clock limit far above the bomb's time: on a loaded machine 500 ms ran out before 32 MiB did.
    const bombed = new LambdaRuntime({ timeoutMs: 10_000, memoryLimitMiB: 32, prewarm: 1 });
    try {
      const f = failure(await bombed.invoke('const a = []; while (true) a.push(new Array(1000000).fill(1))', req()));
      assert.equal(f.code, 'lambda_memory');
      assert.match(f.message, /32 MiB/);
      assert.equal(json(await bombed.invoke('export default () => 7', req())), 7);
    } finally {
      bombed.close();
    }
  });
});

describe('lambda runtime: sandbox escapes fail', () => {
  const escapes: [string, string][] = [
    ['the Function constructor', 'this.constructor.constructor("return process")()'],
    ['dynamic import', 'export default async () => { await import("fs"); return "escaped" }'],
    ['a static import', 'import fs from "fs"; export default () => "escaped"'],
    ['globalThis.require', 'globalThis.require("fs")'],
    ['process', 'process.exit(1)'],
    ["fetch's Function constructor", 'fetch.constructor("return process")().exit(1)'],
    ["a web API's Function constructor", 'new URL("http://x").constructor.constructor("return require")()("fs")'],
    [
      "ctx.platform's Function constructor",
      'export default (req, ctx) => ctx.platform.request.constructor("return process")().pid',
    ],
  ];
  for (const [name, code] of escapes) {
    it(`rejects ${name}`, async () => {
      assert.equal(failure(await runtime.invoke(code, req())).code, 'lambda_error');
    });
  }

  it('has no timers or host globals; fetch exists but has no host to call without one', async () => {
    const r = await runtime.invoke(
      '[typeof setTimeout, typeof setInterval, typeof require, typeof process, typeof XMLHttpRequest, typeof fetch].join()',
      req(),
    );
    assert.equal(json(r), 'undefined,undefined,undefined,undefined,undefined,function');
    const refused = await runtime.invoke(
      'export default async () => { try { await fetch("http://example.com/"); return "fetched" } catch (e) { return e.name + ": " + e.message } }',
      req(),
    );
    assert.equal(json(refused), 'TypeError: this invocation has ended');
  });

  it('reaches no host reference through the globals, the web APIs or ctx', async () => {
    // Every value reachable in a few steps from the global object: none is an isolated-vm
    // reference (an object with applySync, derefInto or copySync) to the host.
    const code = `export default (req, ctx) => {
      const seen = new Set(); const found = [];
      const visit = (v, path, depth) => {
        if (v === null || (typeof v !== 'object' && typeof v !== 'function') || seen.has(v) || depth > 4) return;
        seen.add(v);
        for (const k of ['applySync', 'derefInto', 'copySync']) if (typeof v[k] === 'function') found.push(path);
        for (const name of Reflect.ownKeys(v)) {
          let child; try { child = v[name]; } catch { continue; }
          visit(child, path + '.' + String(name), depth + 1);
        }
        try { visit(Object.getPrototypeOf(v), path + '.__proto__', depth + 1); } catch {}
      };
      visit(globalThis, 'globalThis', 0); visit(ctx, 'ctx', 0);
      return found;
    }`;
    assert.deepEqual(json(await runtime.invoke(code, req())), []);
  });
});
