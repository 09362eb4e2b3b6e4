import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Scheduler } from '../../../packages/client/src/index.ts';
import { DraftError } from '../../../src/services/console/ui/src/lambda-change.ts';
import {
  deliveryChange,
  deliveryDraftOf,
  describeRetry,
  type DeliveryDraft,
} from '../../../src/services/console/ui/src/scheduler-change.ts';

const PLAIN: Scheduler = {
  id: 'jobs',
  display_name: 'Jobs',
  ready: true,
  scheduled: 0,
  inflight: 0,
  created_at: '2026-01-01T00:00:00Z',
  updated_at: '2026-01-01T00:00:00Z',
};
const RETRY = { max_attempts: 5, base: '5s', factor: 2, cap: '15m' };
const HOOKED: Scheduler = { ...PLAIN, target: { url: 'https://example.com/hook', secret_set: true }, retry: RETRY };
const LAMBDA: Scheduler = { ...PLAIN, target: { lambda_id: 'l-1' }, retry: RETRY };

const edit = (scheduler: Scheduler, change: Partial<DeliveryDraft>) =>
  deliveryChange({ ...deliveryDraftOf(scheduler), ...change }, scheduler);

describe('console: the scheduler target form', () => {
  it('starts from the stored target, without any secret', () => {
    assert.deepEqual(deliveryDraftOf(PLAIN), {
      kind: 'none',
      lambdaId: '',
      url: '',
      secret: '',
      maxAttempts: '',
      base: '',
      factor: '',
      cap: '',
    });
    assert.deepEqual(deliveryDraftOf(HOOKED), {
      kind: 'webhook',
      lambdaId: '',
      url: 'https://example.com/hook',
      secret: '',
      maxAttempts: '5',
      base: '5s',
      factor: '2',
      cap: '15m',
    });
    assert.equal(deliveryDraftOf(LAMBDA).lambdaId, 'l-1');
  });

  it('sends nothing when nothing changed', () => {
    for (const scheduler of [PLAIN, HOOKED, LAMBDA]) assert.equal(edit(scheduler, {}), null);
    // The same URL without a new secret keeps the webhook as it is.
    assert.equal(edit(HOOKED, { url: ' https://example.com/hook ' }), null);
  });

  it('sets, replaces and removes a target', () => {
    assert.deepEqual(edit(PLAIN, { kind: 'webhook', url: 'https://a.example/h', secret: 's'.repeat(16) }), {
      target: { url: 'https://a.example/h', secret: 's'.repeat(16) },
    });
    assert.deepEqual(edit(HOOKED, { secret: 'new-secret-0123456789' }), {
      target: { url: 'https://example.com/hook', secret: 'new-secret-0123456789' },
    });
    assert.deepEqual(edit(HOOKED, { kind: 'lambda', lambdaId: 'l-2' }), { target: { lambda_id: 'l-2' } });
    assert.deepEqual(edit(LAMBDA, { lambdaId: 'l-2' }), { target: { lambda_id: 'l-2' } });
    assert.deepEqual(edit(LAMBDA, { kind: 'none' }), { target: null });
  });

  it('says what is missing before sending', () => {
    assert.throws(() => edit(PLAIN, { kind: 'lambda' }), DraftError);
    assert.throws(() => edit(PLAIN, { kind: 'webhook', secret: 's'.repeat(16) }), DraftError);
    // A new URL needs the secret again: the stored one cannot be read back.
    assert.throws(() => edit(HOOKED, { url: 'https://other.example/h' }), /secret/);
    assert.throws(() => edit(PLAIN, { maxAttempts: 'three' }), /Max attempts/);
  });

  it('sends the retry policy when it changed; all emptied restores the defaults', () => {
    assert.deepEqual(edit(PLAIN, { maxAttempts: '1' }), { retry: { max_attempts: 1 } });
    assert.deepEqual(edit(HOOKED, { maxAttempts: '2', base: '1s' }), {
      retry: { max_attempts: 2, base: '1s', factor: 2, cap: '15m' },
    });
    assert.deepEqual(edit(HOOKED, { maxAttempts: '', base: '', factor: '', cap: '' }), { retry: null });
    assert.deepEqual(edit(PLAIN, { kind: 'webhook', url: 'https://a.example/h', secret: 'x'.repeat(16), cap: '1m' }), {
      target: { url: 'https://a.example/h', secret: 'x'.repeat(16) },
      retry: { cap: '1m' },
    });
  });

  it('describes the retry policy', () => {
    assert.equal(describeRetry(undefined), 'platform defaults');
    assert.equal(describeRetry(RETRY), '5 attempts; waits 5s, × 2 per attempt, at most 15m');
    assert.equal(describeRetry({ ...RETRY, max_attempts: 1 }), '1 attempt; waits 5s, × 2 per attempt, at most 15m');
  });
});
