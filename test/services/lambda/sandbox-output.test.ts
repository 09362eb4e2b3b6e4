import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { loadSettings, SettingsError } from '../../../src/config.ts';
import { lambdaServiceWith } from '../../../src/services/lambda/index.ts';
import { LambdaRuntime } from '../../../src/services/lambda/runtime/sandbox.ts';
import type { InvokeResult, LambdaRequest } from '../../../src/services/lambda/runtime/sandbox.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';

// Issue 17, items B and C: the host trusts nothing the sandbox returns, and lambda output is capped.

const MiB = 1024 * 1024;
const req: LambdaRequest = { method: 'GET', path: '/x', query: {}, headers: {} };
let n = 0;
const key = () => `lambda-${++n}`;

function errorOf(r: InvokeResult): { code: string; message: string } {
  assert.equal(r.kind, 'error', JSON.stringify(r).slice(0, 300));
  return r.kind === 'error' ? { code: r.code, message: r.message } : { code: '', message: '' };
}

const logBytes = (r: InvokeResult) => r.logs.reduce((sum, l) => sum + l.message.length, 0);

describe('lambda runtime: what the sandbox returns is checked by the host', () => {
  const runtime = new LambdaRuntime({ timeoutMs: 3000, memoryLimitMiB: 64, prewarm: 1, maxResponseBytes: MiB });
  after(() => runtime.close());

  it('keeps console output within 64 KiB and 1,000 lines however the code tampers with intrinsics', async () => {
    const tamperers = [
      // Replaces JSON.stringify to smuggle 5 MB of log lines into the result.
      `const real = JSON.stringify;
       JSON.stringify = function (v, ...rest) {
         if (v && typeof v === 'object' && Array.isArray(v.logs)) for (let i = 0; i < 80; i++) v.logs.push({ level: 'log', message: 'x'.repeat(65536) });
         return real.call(this, v, ...rest);
       };
       export default () => 1`,
      // Replaces Array.prototype.push so the prelude's own bookkeeping is bypassed.
      `const big = 'y'.repeat(65536);
       const push = Array.prototype.push;
       Array.prototype.push = function (...items) { for (let i = 0; i < 40; i++) push.call(this, { level: 'log', message: big }); return push.apply(this, items); };
       export default () => { console.log('a'); console.log('b'); return 1 }`,
      // Plain volume: many long lines and many empty lines.
      `export default () => { for (let i = 0; i < 100; i++) console.log('z'.repeat(100000)); for (let i = 0; i < 100000; i++) console.log(); return 1 }`,
    ];
    for (const code of tamperers) {
      const r = await runtime.invoke(code, req, { contextKey: key() });
      assert.ok(logBytes(r) <= 65536, `console output of ${logBytes(r)} characters passed the cap`);
      assert.ok(r.logs.length <= 1000, `${r.logs.length} console lines passed the cap`);
      for (const line of r.logs) assert.ok(['log', 'info', 'debug', 'warn', 'error', 'trace'].includes(line.level));
    }
  });

  it('does not let a replaced JSON.stringify, Array.prototype.join or Promise.prototype.then forge the result', async () => {
    const forgers = [
      `JSON.stringify = () => '{"kind":"response","status":101,"headers":[["Transfer-Encoding","chunked"]],"body":"","logs":[]}'; export default () => "small"`,
      `Array.prototype.join = () => 'x'.repeat(1000); String.prototype.slice = () => 'x'; export default () => "small"`,
      `const then = Promise.prototype.then;
       Promise.prototype.then = function (ok, bad) { return then.call(this, (v) => ok ? ok('x'.repeat(3 * 1024 * 1024)) : v, bad); };
       export default async () => "small"`,
      `Object.defineProperty(Object.prototype, 'toJSON', { value: function () { return { kind: 'response', status: 101 } }, configurable: true });
       Object.defineProperty(Array.prototype, 'toJSON', { value: function () { return 'forged' }, configurable: true });
       export default () => "small"`,
    ];
    for (const code of forgers) {
      const r = await runtime.invoke(code, req, { contextKey: key() });
      assert.deepEqual(
        { kind: r.kind, json: r.kind === 'json' ? r.json : undefined },
        { kind: 'json', json: '"small"' },
        code,
      );
    }
  });

  it('does not take a lookalike object for a Response', async () => {
    const r = await runtime.invoke(
      `Object.defineProperty(Response, Symbol.hasInstance, { value: () => true });
      export default () => ({ status: 101, headers: { forEach(fn) { fn('chunked', 'transfer-encoding') } }, _body: 'x' })`,
      req,
      { contextKey: key() },
    );
    assert.equal(r.kind, 'json');
    const s = await runtime.invoke(
      `export default () => { const r = new Response("ok"); try { r.status = 101 } catch {} return r }`,
      req,
      { contextKey: key() },
    );
    assert.equal(s.kind === 'response' && s.status, 200);
  });

  it('rejects header names that are not tokens and values with CR, LF, NUL or characters beyond one byte', async () => {
    for (const [name, value] of [
      ['x-evil', 'a\\r\\nSet-Cookie: stratus_session=x'],
      ['x-evil', 'a\\nb'],
      ['x-evil', 'a\\u0000b'],
      ['bad name', 'v'],
      ['', 'v'],
      ['x-euro', '\\u20ac'],
      ['x:y', 'v'],
    ]) {
      const r = await runtime.invoke(
        `export default () => new Response("x", { headers: [["${name}", "${value}"]] })`,
        req,
        { contextKey: key() },
      );
      assert.equal(errorOf(r).code, 'lambda_error', `${name}: ${value}`);
      const set = await runtime.invoke(
        `export default () => { const r = new Response("x"); r.headers.set("${name}", "${value}"); return r }`,
        req,
        { contextKey: key() },
      );
      assert.equal(errorOf(set).code, 'lambda_error', `set ${name}: ${value}`);
    }
    // Surrounding whitespace is trimmed, as the Fetch standard does; a tab inside is fine.
    const ok = await runtime.invoke(
      'export default () => new Response("x", { headers: { "x-a": "  a\\tb \\r\\n" } })',
      req,
      { contextKey: key() },
    );
    assert.ok(ok.kind === 'response', JSON.stringify(ok));
    if (ok.kind === 'response')
      assert.deepEqual(
        ok.headers.find(([k]) => k === 'x-a'),
        ['x-a', 'a\tb'],
      );
  });

  it('rejects statuses outside 200–599', async () => {
    for (const status of ['101', '199', '600', '0', '200.5', '"abc"', 'NaN']) {
      const r = await runtime.invoke(`export default () => new Response("x", { status: ${status} })`, req, {
        contextKey: key(),
      });
      assert.equal(errorOf(r).code, 'lambda_error', status);
    }
  });

  it('caps the response body: JSON, write() text, Response strings and bytes', async () => {
    const tooLarge = [
      `export default () => 'x'.repeat(${2 * MiB})`,
      `for (let i = 0; i < 3; i++) write('x'.repeat(${MiB / 2}))`,
      `export default () => new Response('x'.repeat(${2 * MiB}))`,
      `export default () => new Response(new Uint8Array(${2 * MiB}))`,
      // 600 Ki characters but 1.2 MiB of UTF-8.
      `export default () => new Response('é'.repeat(${600 * 1024}))`,
      `export default () => { const a = []; for (let i = 0; i < 40; i++) a.push('x'.repeat(65536)); return a }`,
    ];
    for (const code of tooLarge) {
      const f = errorOf(await runtime.invoke(code, req, { contextKey: key() }));
      assert.equal(f.code, 'lambda_response_too_large', code);
      assert.match(f.message, /1048576 bytes/);
    }
    // Right at the cap is fine: a JSON string of 1 MiB including its quotes.
    const atCap = await runtime.invoke(`export default () => 'x'.repeat(${MiB - 2})`, req, { contextKey: key() });
    assert.equal(atCap.kind === 'json' && atCap.json.length, MiB);
    const bytes = await runtime.invoke('export default () => new Response(new Uint8Array([0, 255, 128, 65]))', req, {
      contextKey: key(),
    });
    assert.ok(bytes.kind === 'response' && Buffer.isBuffer(bytes.body), JSON.stringify(bytes));
    if (bytes.kind === 'response') assert.deepEqual([...(bytes.body as Buffer)], [0, 255, 128, 65]);
  });

  it('bounds the error message a lambda can produce', async () => {
    const f = errorOf(
      await runtime.invoke(`export default () => { throw new Error('e'.repeat(${2 * MiB})) }`, req, {
        contextKey: key(),
      }),
    );
    assert.equal(f.code, 'lambda_error');
    assert.ok(f.message.length <= 4096, `${f.message.length} characters`);
  });
});

describe('lambda service: sandbox output reaches clients only in a valid shape', () => {
  let service: TestService;
  const owner = asUser('user-b');
  before(async () => {
    service = await startTestService(lambdaServiceWith({ timeoutMs: 3000, memoryLimitMiB: 64, prewarm: 1 }), {
      lambdaMaxResponseBytes: MiB,
    });
  });
  after(async () => {
    await service.close();
  });

  let seq = 0;
  const run = async (code: string): Promise<LightMyRequestResponse> => {
    const made = await service.app.inject({
      method: 'POST',
      url: '/api/v0/lambdas',
      headers: { ...owner, 'content-type': 'application/json' },
      payload: JSON.stringify({ name: `l${++seq}`, code }),
    });
    assert.equal(made.statusCode, 201, made.body);
    return service.app.inject({
      method: 'GET',
      url: `/run/${made.json<{ id: string }>().id}`,
      headers: { host: 'lambda.localhost' },
    });
  };
  const codeOf = (res: LightMyRequestResponse): string | undefined => {
    try {
      return res.json<{ error?: { code: string } }>().error?.code;
    } catch {
      return undefined;
    }
  };
  const HOP = [
    'transfer-encoding',
    'connection',
    'keep-alive',
    'upgrade',
    'te',
    'trailer',
    'proxy-authenticate',
    'proxy-connection',
    'proxy-x',
  ];

  it(
    'drops framing and hop-by-hop headers in any letter case, and frames the body itself',
    { timeout: 20_000 },
    async () => {
      const viaStringify = await run(`const real = JSON.stringify;
      JSON.stringify = function (v, ...rest) {
        if (v && typeof v === 'object' && Array.isArray(v.headers)) v.headers.push(['Transfer-Encoding', 'chunked'], ['Content-Length', '5'], ['Connection', 'close'], ['Upgrade', 'websocket']);
        return real.call(this, v, ...rest);
      };
      export default () => new Response("hello there")`);
      const direct = await run(
        `export default () => new Response("hello there", { headers: { "Transfer-Encoding": "chunked", "CONTENT-LENGTH": "1", "Connection": "close", "Keep-Alive": "timeout=1", "Upgrade": "h2c", "TE": "trailers", "Trailer": "x", "Proxy-Authenticate": "Basic", "Proxy-Connection": "close", "Proxy-X": "1", "X-Kept": "yes" } })`,
      );
      for (const res of [viaStringify, direct]) {
        assert.equal(res.statusCode, 200, res.body);
        assert.equal(res.body, 'hello there');
        assert.equal(res.headers['content-length'], '11');
        // The server may add its own `Connection`; the lambda's never passes.
        assert.notEqual(res.headers.connection, 'close');
        for (const h of HOP.filter((x) => x !== 'connection')) assert.equal(res.headers[h], undefined, h);
      }
      assert.equal(direct.headers['x-kept'], 'yes');
    },
  );

  it('answers a forged status of 101 or out of range as a lambda error', { timeout: 20_000 }, async () => {
    for (const status of [101, 99, 600]) {
      const res = await run(`const real = JSON.stringify;
        JSON.stringify = function (v, ...rest) { if (v && typeof v === 'object' && v.kind === 'response') v.status = ${status}; return real.call(this, v, ...rest) };
        export default () => new Response("x")`);
      // Either the forgery never reaches the host (200), or the host refuses it; never a 1xx or a hang.
      assert.ok(
        res.statusCode === 200 || (res.statusCode === 500 && codeOf(res) === 'lambda_error'),
        `${status} → ${res.statusCode} ${res.body}`,
      );
    }
    const bad = await run('export default () => new Response("x", { status: 101 })');
    assert.equal(bad.statusCode, 500);
    assert.equal(codeOf(bad), 'lambda_error');
  });

  it(
    'answers invalid header names and values as a lambda error, never a raw 500 or an injected header',
    { timeout: 20_000 },
    async () => {
      const forged = await run(
        `export default () => { const r = new Response("x"); r.headers.forEach = (fn) => { fn("a\\r\\nX-Injected: 1", "x-evil"); fn("v", "bad name"); }; return r }`,
      );
      // The replaced forEach is not what the host reads; either way no raw 500 and no injected header.
      assert.ok(
        (forged.statusCode === 200 && forged.body === 'x') || codeOf(forged) === 'lambda_error',
        `${forged.statusCode} ${forged.body}`,
      );
      assert.equal(forged.headers['x-injected'], undefined);
      assert.equal(forged.headers['x-evil'], undefined);
      for (const [name, value] of [
        ['x-evil', 'a\\r\\nX-Injected: 1'],
        ['bad name', 'v'],
        ['x-nul', 'a\\u0000'],
        ['x-euro', '\\u20ac'],
      ]) {
        const res = await run(`export default () => new Response("x", { headers: [["${name}", "${value}"]] })`);
        assert.equal(res.statusCode, 500, res.body);
        assert.equal(codeOf(res), 'lambda_error', `${name}: ${res.body}`);
        assert.equal(res.headers['x-injected'], undefined);
      }
    },
  );

  it('answers 500 lambda_response_too_large above lambdaMaxResponseBytes', async () => {
    const res = await run(`export default () => 'x'.repeat(${2 * MiB})`);
    assert.equal(res.statusCode, 500);
    assert.equal(codeOf(res), 'lambda_response_too_large');
    assert.equal((await run(`export default () => 'x'.repeat(${MiB / 2})`)).statusCode, 200);
  });
});

describe('settings: lambdaMaxResponseBytes and lambdaOwnerConcurrency', () => {
  it('default to 6 MiB and 8, and read units and whole numbers from the environment', () => {
    const defaults = loadSettings({}, {}, '/nonexistent');
    assert.equal(defaults.lambdaMaxResponseBytes, 6 * MiB);
    assert.equal(defaults.lambdaOwnerConcurrency, 8);
    const set = loadSettings({}, { LAMBDA_MAX_RESPONSE_BYTES: '6MiB', LAMBDA_OWNER_CONCURRENCY: '3' }, '/nonexistent');
    assert.equal(set.lambdaMaxResponseBytes, 6 * MiB);
    assert.equal(set.lambdaOwnerConcurrency, 3);
    assert.equal(loadSettings({}, { LAMBDA_MAX_RESPONSE_BYTES: '2 MB' }, '/nonexistent').lambdaMaxResponseBytes, 2e6);
    for (const bad of [
      { LAMBDA_MAX_RESPONSE_BYTES: '0' },
      { LAMBDA_MAX_RESPONSE_BYTES: 'lots' },
      { LAMBDA_OWNER_CONCURRENCY: '0' },
      { LAMBDA_OWNER_CONCURRENCY: '1.5' },
      { LAMBDA_OWNER_CONCURRENCY: 'x' },
    ]) {
      assert.throws(() => loadSettings({}, bad, '/nonexistent'), SettingsError, JSON.stringify(bad));
    }
  });
});
