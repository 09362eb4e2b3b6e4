import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { webhookSignature } from '../../../src/services/scheduler/delivery.ts';
import { backoffMs, backoffOf, retryOf } from '../../../src/services/scheduler/target.ts';

// README: Delivery (retry policy) and Webhook signatures.

describe('scheduler retry backoff', () => {
  it('waits min(cap, base × factor^(n−1)) after failed attempt n, with the documented defaults', () => {
    const defaults = backoffOf(retryOf(null));
    assert.deepEqual(defaults, { maxAttempts: 5, baseMs: 5_000, factor: 2, capMs: 900_000 });
    assert.deepEqual(
      [1, 2, 3, 4, 5, 9, 30].map((n) => backoffMs(defaults, n)),
      [5_000, 10_000, 20_000, 40_000, 80_000, 900_000, 900_000],
    );
    const custom = backoffOf(retryOf(JSON.stringify({ max_attempts: 3, base: '100ms', factor: 3, cap: '1s' })));
    assert.deepEqual(
      [1, 2, 3, 4].map((n) => backoffMs(custom, n)),
      [100, 300, 900, 1_000],
    );
  });
});

describe('webhook signature', () => {
  it('is t=<seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>', () => {
    const body = '{"a":1}';
    const expected = createHmac('sha256', 'k'.repeat(16)).update(`1700000000.${body}`).digest('hex');
    assert.equal(webhookSignature('k'.repeat(16), 1_700_000_000, body), `t=1700000000,v1=${expected}`);
    assert.notEqual(webhookSignature('k'.repeat(16), 1_700_000_001, body), `t=1700000000,v1=${expected}`);
  });
});
