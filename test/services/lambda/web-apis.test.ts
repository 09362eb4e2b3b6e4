import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { LambdaRuntime } from '../../../src/services/lambda/runtime/sandbox.ts';
import type { InvokeResult, LambdaRequest } from '../../../src/services/lambda/runtime/sandbox.ts';

// Issue 22, item 1: the web APIs a lambda has besides fetch (done by the host, copied in and out).

const runtime = new LambdaRuntime({ timeoutMs: 3000, maxIsolates: 2, prewarm: 1 });
after(() => runtime.close());
const req: LambdaRequest = { method: 'GET', path: '/', query: {}, headers: {} };

async function value(body: string): Promise<unknown> {
  const r: InvokeResult = await runtime.invoke(`export default async (req, ctx) => { ${body} }`, req);
  assert.equal(r.kind, 'json', JSON.stringify(r));
  return r.kind === 'json' ? JSON.parse(r.json) : undefined;
}

describe('lambda web APIs', () => {
  it('URL parses, resolves, normalises and keeps searchParams in step', async () => {
    assert.deepEqual(
      await value(`
        const u = new URL('../b?x=1&y=two words#frag', 'https://Example.COM:443/a/c');
        const before = [u.href, u.origin, u.host, u.pathname, u.search, u.hash, u.searchParams.get('y')];
        u.searchParams.append('z', 'ä&=');
        u.port = '8443';
        u.hash = '';
        let invalid; try { new URL('no scheme'); } catch (e) { invalid = e.name + ': ' + e.message; }
        return [before, u.href, URL.canParse('http://x'), URL.canParse('nope'), invalid, JSON.stringify({ u })];`),
      [
        [
          'https://example.com/b?x=1&y=two%20words#frag',
          'https://example.com',
          'example.com',
          '/b',
          '?x=1&y=two%20words',
          '#frag',
          'two words',
        ],
        'https://example.com:8443/b?x=1&y=two+words&z=%C3%A4%26%3D',
        true,
        false,
        'TypeError: Invalid URL: "no scheme"',
        '{"u":"https://example.com:8443/b?x=1&y=two+words&z=%C3%A4%26%3D"}',
      ],
    );
  });

  it('URLSearchParams from strings, records and pairs, with sort, delete and iteration', async () => {
    assert.deepEqual(
      await value(`
        const p = new URLSearchParams('?b=2&a=1&b=3&c=%E2%82%AC+x');
        p.sort(); p.delete('b', '3'); p.set('d', '4');
        const q = new URLSearchParams({ k: 'v w' });
        const r = new URLSearchParams([['x', '1'], ['x', '2']]);
        return [p.toString(), [...p.keys()], p.get('c'), p.getAll('b'), p.has('a'), p.size, q.toString(), r.getAll('x')];`),
      ['a=1&b=2&c=%E2%82%AC+x&d=4', ['a', 'b', 'c', 'd'], '€ x', ['2'], true, 4, 'k=v+w', ['1', '2']],
    );
  });

  it('TextEncoder and TextDecoder, streaming split characters, fatal and other encodings', async () => {
    assert.deepEqual(
      await value(`
        const bytes = new TextEncoder().encode('héllo €😀');
        const d = new TextDecoder();
        let streamed = '';
        for (let i = 0; i < bytes.length; i++) streamed += d.decode(bytes.subarray(i, i + 1), { stream: true });
        streamed += d.decode();
        const into = new Uint8Array(4);
        const r = new TextEncoder().encodeInto('a€b', into);
        let fatal; try { new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array([0xff])); } catch (e) { fatal = e.name; }
        let unknown; try { new TextDecoder('klingon'); } catch (e) { unknown = e.name; }
        return [Array.from(bytes), streamed, r, Array.from(into), new TextDecoder().decode(new Uint8Array([0xef, 0xbb, 0xbf, 0x41])),
          new TextDecoder('latin1').decode(new Uint8Array([0xe9])), new TextDecoder('utf-16le').decode(new Uint8Array([0x41, 0, 0x42, 0])),
          new TextDecoder().decode(new Uint8Array([0xff])), fatal, unknown];`),
      [
        [...Buffer.from('héllo €😀')],
        'héllo €😀',
        { read: 2, written: 4 },
        [0x61, 0xe2, 0x82, 0xac],
        'A',
        'é',
        'AB',
        '\ufffd',
        'TypeError',
        'RangeError',
      ],
    );
  });

  it('atob, btoa and crypto (randomUUID, getRandomValues, subtle.digest)', async () => {
    const [b64, back, bad, uuid, random, digest, unknown] = (await value(`
      let bad; try { atob('***'); } catch (e) { bad = e.name; }
      const random = crypto.getRandomValues(new Uint32Array(4));
      const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode('abc')));
      let unknown; try { await crypto.subtle.digest('MD5', new Uint8Array(1)); } catch (e) { unknown = e.name; }
      return [btoa('hi\\u00ff'), atob('aGn/'), bad, crypto.randomUUID(), Array.from(random), Array.from(digest), unknown];`)) as [
      string,
      string,
      string,
      string,
      number[],
      number[],
      string,
    ];
    assert.equal(b64, 'aGn/');
    assert.equal(back, 'hi\u00ff');
    assert.equal(bad, 'InvalidCharacterError');
    assert.match(uuid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(random.length, 4);
    assert.ok(random.some((n) => n !== 0));
    assert.deepEqual(digest, [...createHash('sha256').update('abc').digest()]);
    assert.equal(unknown, 'NotSupportedError');
  });

  it('bounds what one call and one run may hand the host utilities (they run on the Node thread)', async () => {
    assert.deepEqual(
      await value(`
        const big = 'a'.repeat(17 * 1024 * 1024);
        let one; try { btoa(big); } catch (e) { one = e.name + ': ' + e.message; }
        const part = 'a'.repeat(15 * 1024 * 1024);
        let calls = 0, many;
        try { for (; calls < 10; calls++) new TextEncoder().encode(part); } catch (e) { many = e.name + ': ' + e.message; }
        return [one, calls, many];`),
      [
        'RangeError: at most 16777216 bytes or characters of input per call',
        4,
        'RangeError: URL, text, base64 and crypto calls took more than 67108864 bytes or characters of input in this invocation',
      ],
    );
  });

  it('Request and Response bodies: read once, clone, arrayBuffer, form bodies', async () => {
    assert.deepEqual(
      await value(`
        const r = new Request('https://api.example.com/x', { method: 'post', body: new URLSearchParams({ a: '1 2' }) });
        const copy = r.clone();
        const text = await r.text();
        let again; try { await r.text(); } catch (e) { again = e.name; }
        let getBody; try { new Request('https://x.example', { body: 'no' }); } catch (e) { getBody = e.message; }
        let relative; try { new Request('/relative'); } catch (e) { relative = e.name; }
        const res = new Response(new Uint8Array([104, 105]));
        const bytes = Array.from(new Uint8Array(await res.clone().arrayBuffer()));
        return [r.method, r.headers.get('content-type'), text, await copy.text(), r.bodyUsed, again, getBody, relative,
          bytes, await res.text(), res.bodyUsed];`),
      [
        'POST',
        'application/x-www-form-urlencoded;charset=UTF-8',
        'a=1+2',
        'a=1+2',
        true,
        'TypeError',
        'Request with GET/HEAD method cannot have body.',
        'TypeError',
        [104, 105],
        'hi',
        true,
      ],
    );
  });

  it('gives the handler a ctx even without invocation data, and the same ctx to scripts', async () => {
    assert.deepEqual(await value('return [Object.keys(ctx.env), typeof ctx.platform.docdb, Object.isFrozen(ctx)];'), [
      [],
      'function',
      true,
    ]);
    const script = await runtime.invoke('ctx.env.GREETING + " " + ctx.lambda.name', req, {
      ctx: { invocation_id: 'inv-1', lambda: { id: 'l1', name: 'hello' }, env: { GREETING: 'hi' } },
    });
    assert.deepEqual(script, { kind: 'json', json: '"hi hello"', logs: [] });
  });
});
