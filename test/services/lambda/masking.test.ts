import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { maskSecrets, sharedEnd } from '../../../src/services/lambda/masking.ts';
import { MAX_LOG_CHARS, MAX_MESSAGE_CHARS } from '../../../src/services/lambda/runtime/sandbox.ts';

// Issue 22, item 2: a secret a run prints or throws reaches no output but the handler's own.

describe("masking secret values in a run's output", () => {
  const secrets = { TOKEN: 'sk-live-123456', QUOTE: 'say "hi"\\now', SHORT: 'abc' };
  // A secret named __proto__ is an own member like any other.
  const special: Record<string, string> = JSON.parse('{"__proto__":"proto-secret-value"}') as Record<string, string>;

  it('masks values as written and as JSON escapes them, whatever their names; short ones stay', () => {
    const result = maskSecrets(
      {
        kind: 'error',
        code: 'lambda_error',
        message: `bad token sk-live-123456 in ${JSON.stringify('say "hi"\\now')}`,
        logs: [
          { level: 'log', message: 'sk-live-123456 and abc' },
          { level: 'log', message: 'proto-secret-value' },
        ],
      },
      { ...secrets, ...special },
    );
    assert.deepEqual(result, {
      kind: 'error',
      code: 'lambda_error',
      message: 'bad token *** in "***"',
      logs: [
        { level: 'log', message: '*** and abc' },
        { level: 'log', message: '***' },
      ],
    });
  });

  it('drops the part of a value that a cap cut off at the end of the message or of the lines', () => {
    const message = `${'x'.repeat(MAX_MESSAGE_CHARS - 6)}sk-liv`;
    const lines = [
      { level: 'log', message: 'a'.repeat(MAX_LOG_CHARS - 100) },
      { level: 'log', message: `${'b'.repeat(92)}sk-live-` },
    ];
    const result = maskSecrets({ kind: 'error', code: 'lambda_error', message, logs: lines }, secrets);
    assert.equal(result.kind === 'error' && result.message, `${'x'.repeat(MAX_MESSAGE_CHARS - 6)}***`);
    assert.equal(result.logs[1]?.message, `${'b'.repeat(92)}***`);
    // An uncut line keeps an ending that only looks like a start of a value.
    const uncut = maskSecrets(
      { kind: 'json', json: '1', logs: [{ level: 'log', message: 'ends with sk-liv' }] },
      secrets,
    );
    assert.equal(uncut.logs[0]?.message, 'ends with sk-liv');
  });

  it('finds the longest end of a text that starts a value', () => {
    assert.equal(sharedEnd('hello sk-li', 'sk-live'), 5);
    assert.equal(sharedEnd('hello', 'sk-live'), 0);
    assert.equal(sharedEnd('aaaa', 'aaab'), 3);
    assert.equal(sharedEnd('x', ''), 0);
    assert.equal(sharedEnd('a'.repeat(100_000), `${'a'.repeat(5_000)}b`), 5_000);
  });
});
