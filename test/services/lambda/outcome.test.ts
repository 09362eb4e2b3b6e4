import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { decodeOutcome, type InvokeResult } from '../../../src/services/lambda/runtime/sandbox.ts';

// Issue 17, item B: the host checks what comes out of the sandbox as untrusted input, even a result
// the prelude could never have produced (as if user code had subverted it).

const MAX = 1000;
const encode = (meta: unknown, body = ''): string => {
  const text = JSON.stringify(meta);
  return `${text.length}\n${text}${body}`;
};
const codeOf = (r: InvokeResult) => (r.kind === 'error' ? r.code : r.kind);

describe('decodeOutcome: the host trusts nothing the sandbox returns', () => {
  it('decodes well-formed results', () => {
    assert.deepEqual(decodeOutcome(encode({ kind: 'json', logs: [] }, '{"a":1}'), MAX), {
      kind: 'json',
      json: '{"a":1}',
      logs: [],
    });
    assert.deepEqual(decodeOutcome(encode({ kind: 'text', logs: [{ level: 'warn', message: 'w' }] }, 'hi'), MAX), {
      kind: 'text',
      text: 'hi',
      logs: [{ level: 'warn', message: 'w' }],
    });
    const r = decodeOutcome(
      encode(
        {
          kind: 'response',
          status: 201,
          headers: [
            ['X-A', 'b'],
            ['set-cookie', 'a=1'],
            ['set-cookie', 'b=2'],
          ],
          binary: false,
          logs: [],
        },
        'body',
      ),
      MAX,
    );
    assert.deepEqual(r, {
      kind: 'response',
      status: 201,
      headers: [
        ['x-a', 'b'],
        ['set-cookie', 'a=1'],
        ['set-cookie', 'b=2'],
      ],
      body: 'body',
      logs: [],
    });
    const bytes = decodeOutcome(
      encode({ kind: 'response', status: 200, headers: [], binary: true, logs: [] }, '\u0000\u00ff'),
      MAX,
    );
    assert.ok(bytes.kind === 'response' && Buffer.isBuffer(bytes.body) && bytes.body.equals(Buffer.from([0, 255])));
  });

  it('answers the quiet JSON form (no console lines) as the general decoding does', () => {
    // The exact metadata the prelude writes, and the same meaning spelled differently (parsed).
    for (const meta of ['{"kind":"json","logs":[]}', '{"logs":[],"kind":"json"}', '{ "kind": "json", "logs": [] }'])
      for (const body of ['{"a":1}', '', 'é'.repeat(MAX / 2 + 1)]) {
        const r = decodeOutcome(`${meta.length}\n${meta}${body}`, MAX);
        if (body.length > MAX / 2) assert.equal(codeOf(r), 'lambda_response_too_large', meta);
        else assert.deepEqual(r, { kind: 'json', json: body, logs: [] }, meta);
      }
  });

  it('answers anything malformed as lambda_error', () => {
    const malformed: unknown[] = [
      undefined,
      42,
      { kind: 'json' },
      '',
      'no header',
      '5\n{"ki',
      '3\n{}}',
      `${'9'.repeat(9)}\n{}`,
      '2\n[]',
      encode('string'),
      encode({ kind: 'nope', logs: [] }),
      encode({ kind: 'response', headers: [], logs: [] }),
      encode({ kind: 'response', status: 200, headers: 'x', logs: [] }),
      encode({ kind: 'response', status: 200, headers: [['a']], logs: [] }),
      encode({ kind: 'response', status: 200, headers: [['a', 1]], logs: [] }),
      encode({ kind: 'response', status: 200, headers: [], binary: 'yes', logs: [] }),
      encode({ kind: 'response', status: 200, headers: [], binary: true, logs: [] }, '\u20ac'),
    ];
    for (const raw of malformed) assert.equal(codeOf(decodeOutcome(raw, MAX)), 'lambda_error', String(raw));
  });

  it('refuses statuses outside 200–599 (1xx included)', () => {
    for (const status of [100, 101, 199, 600, 0, -1, 200.5, '200', null, 1e9]) {
      assert.equal(
        codeOf(decodeOutcome(encode({ kind: 'response', status, headers: [], logs: [] }, 'x'), MAX)),
        'lambda_error',
        String(status),
      );
    }
  });

  it('refuses header names that are not tokens and values with CR, LF, NUL, controls or wide characters', () => {
    const bad: [string, string][] = [
      ['x-a', 'a\r\nb'],
      ['x-a', 'a\nb'],
      ['x-a', 'a\rb'],
      ['x-a', 'a\u0000'],
      ['x-a', '\u0007'],
      ['x-a', '\u007f'],
      ['x-a', '\u20ac'],
      ['bad name', 'v'],
      ['', 'v'],
      ['x:y', 'v'],
      ['x\r\ny', 'v'],
      ['é', 'v'],
    ];
    for (const pair of bad) {
      assert.equal(
        codeOf(decodeOutcome(encode({ kind: 'response', status: 200, headers: [pair], logs: [] }, 'x'), MAX)),
        'lambda_error',
        JSON.stringify(pair),
      );
    }
    const many = Array.from({ length: 101 }, (_, i) => [`x-${i}`, 'v']);
    assert.equal(
      codeOf(decodeOutcome(encode({ kind: 'response', status: 200, headers: many, logs: [] }, 'x'), MAX)),
      'lambda_error',
    );
    const long = [['x-a', 'v'.repeat(70_000)]];
    assert.equal(
      codeOf(decodeOutcome(encode({ kind: 'response', status: 200, headers: long, logs: [] }, 'x'), MAX)),
      'lambda_error',
    );
    // Latin-1 and tabs are what HTTP allows.
    assert.equal(
      codeOf(
        decodeOutcome(
          encode({ kind: 'response', status: 200, headers: [['x-a', 'caf\u00e9\tok']], logs: [] }, 'x'),
          MAX,
        ),
      ),
      'response',
    );
  });

  it('answers a body over the limit as lambda_response_too_large, counting UTF-8 bytes', () => {
    for (const [kind, body] of [
      ['json', 'x'.repeat(MAX + 1)],
      ['text', 'é'.repeat(MAX / 2 + 1)],
      ['response', '€'.repeat(400)],
    ] as const) {
      const r = decodeOutcome(encode({ kind, status: 200, headers: [], logs: [] }, body), MAX);
      assert.equal(codeOf(r), 'lambda_response_too_large', kind);
      assert.match(r.kind === 'error' ? r.message : '', /1000 bytes/);
    }
    assert.equal(
      codeOf(
        decodeOutcome(
          encode({ kind: 'response', status: 200, headers: [], binary: true, logs: [] }, '\u00ff'.repeat(MAX + 1)),
          MAX,
        ),
      ),
      'lambda_response_too_large',
    );
    assert.equal(codeOf(decodeOutcome(encode({ kind: 'too_large', logs: [] }), MAX)), 'lambda_response_too_large');
    assert.equal(codeOf(decodeOutcome('x'.repeat(3 * 1024 * 1024), MAX)), 'lambda_response_too_large');
    assert.equal(codeOf(decodeOutcome(encode({ kind: 'json', logs: [] }, 'x'.repeat(MAX)), MAX)), 'json');
  });

  it('caps console lines and error messages again', () => {
    const logs = Array.from({ length: 3000 }, (_, i) => ({ level: i % 2 ? 'log' : 'evil', message: 'x'.repeat(100) }));
    const r = decodeOutcome(encode({ kind: 'json', logs }, '1'), MAX);
    assert.ok(r.logs.length <= 1000);
    assert.ok(r.logs.every((l) => l.level === 'log'));
    const huge = decodeOutcome(
      encode(
        {
          kind: 'json',
          logs: [
            { level: 'log', message: 'y'.repeat(200_000) },
            { level: 'log', message: 'z' },
          ],
        },
        '1',
      ),
      MAX,
    );
    assert.deepEqual(
      huge.logs.map((l) => l.message.length),
      [65_536],
    );
    const junk = decodeOutcome(
      encode(
        {
          kind: 'json',
          logs: [null, 1, { level: 'log' }, { level: 'log', message: 2 }, { level: 'info', message: 'ok' }],
        },
        '1',
      ),
      MAX,
    );
    assert.deepEqual(junk.logs, [{ level: 'info', message: 'ok' }]);
    const failed = decodeOutcome(encode({ kind: 'error', message: 'm'.repeat(10_000), logs: [] }), MAX);
    assert.ok(failed.kind === 'error' && failed.code === 'lambda_error' && failed.message.length === 4096);
  });
});
