import { afterEach, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  MAX_NOTIFY_BYTES,
  NotifyPayloadTooLargeError,
  type Notifier,
  type NotifierOptions,
} from '../../src/store/notifier/types.ts';

/** Resolves once `predicate` holds; rejects after `timeoutMs` so a lost message fails, never hangs. */
export async function waitFor(predicate: () => boolean, timeoutMs = 5000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Subscribes and records what arrives. */
export function record(notifier: Notifier, topic: string): { messages: string[]; unsubscribe: () => void } {
  const messages: string[] = [];
  const unsubscribe = notifier.subscribe(topic, (message) => messages.push(message));
  return { messages, unsubscribe };
}

export function uniqueTopic(label: string): string {
  return `${label}.${randomBytes(4).toString('hex')}`;
}

/**
 * The behaviour every Notifier adapter must have, observed through one instance (it publishes to
 * itself). Cross-instance delivery is adapter-specific and tested beside this. `make` is called
 * per case with the options the case needs.
 */
export function runNotifierContract(
  name: string,
  make: (options: NotifierOptions) => Promise<{ notifier: Notifier; cleanup(): Promise<void> }>,
): void {
  describe(`Notifier contract: ${name}`, () => {
    let notifier: Notifier;
    let cleanup: () => Promise<void>;
    const handlerErrors: Array<{ error: unknown; topic: string }> = [];

    beforeEach(async () => {
      handlerErrors.length = 0;
      ({ notifier, cleanup } = await make({ onHandlerError: (error, topic) => handlerErrors.push({ error, topic }) }));
    });
    afterEach(async () => {
      await cleanup();
    });

    it('delivers a published message to a subscriber, asynchronously and unchanged', async () => {
      const topic = uniqueTopic('deliver');
      const inbox = record(notifier, topic);
      const message = JSON.stringify({ event: 'changed', id: 42, text: 'héllo \u0000 "quoted" \ud83d\ude00' });
      const published = notifier.publish(topic, message);
      // Never re-entered synchronously from publish.
      assert.deepEqual(inbox.messages, []);
      await published;
      await waitFor(() => inbox.messages.length > 0, 5000, 'delivery');
      assert.deepEqual(inbox.messages, [message]);
    });

    it('delivers messages from one publisher in order', async () => {
      const topic = uniqueTopic('order');
      const inbox = record(notifier, topic);
      const sent = Array.from({ length: 25 }, (_, i) => `m${i}`);
      for (const message of sent) await notifier.publish(topic, message);
      await waitFor(() => inbox.messages.length === sent.length, 5000, 'all messages');
      assert.deepEqual(inbox.messages, sent);
    });

    it('keeps topics isolated', async () => {
      const a = uniqueTopic('a');
      const b = uniqueTopic('b');
      const inboxA = record(notifier, a);
      const inboxB = record(notifier, b);
      await notifier.publish(b, 'for b');
      await notifier.publish(a, 'for a');
      // In-order delivery: once a's message is here, b's has been delivered too.
      await waitFor(() => inboxA.messages.length === 1 && inboxB.messages.length === 1, 5000, 'both topics');
      assert.deepEqual(inboxA.messages, ['for a']);
      assert.deepEqual(inboxB.messages, ['for b']);
    });

    it('delivers to every subscriber of a topic, each subscription separately', async () => {
      const topic = uniqueTopic('fanout');
      const first = record(notifier, topic);
      const second = record(notifier, topic);
      const calls: string[] = [];
      const handler = (message: string) => calls.push(message);
      notifier.subscribe(topic, handler);
      notifier.subscribe(topic, handler);
      await notifier.publish(topic, 'hello');
      await waitFor(
        () => first.messages.length === 1 && second.messages.length === 1 && calls.length === 2,
        5000,
        'fan-out',
      );
      assert.deepEqual(first.messages, ['hello']);
      assert.deepEqual(second.messages, ['hello']);
      assert.deepEqual(calls, ['hello', 'hello']);
    });

    it('stops delivery after unsubscribe (and unsubscribing twice is harmless)', async () => {
      const topic = uniqueTopic('unsub');
      const gone = record(notifier, topic);
      const staying = record(notifier, topic);
      gone.unsubscribe();
      gone.unsubscribe();
      await notifier.publish(topic, 'after');
      await waitFor(() => staying.messages.length === 1, 5000, 'remaining subscriber');
      assert.deepEqual(gone.messages, []);

      // Unsubscribing between publish and delivery also prevents the call.
      const late = record(notifier, topic);
      const publishing = notifier.publish(topic, 'racing');
      late.unsubscribe();
      await publishing;
      await notifier.publish(topic, 'sentinel');
      await waitFor(() => staying.messages.length === 3, 5000, 'sentinel');
      assert.deepEqual(late.messages, []);
      assert.deepEqual(staying.messages, ['after', 'racing', 'sentinel']);
    });

    it('isolates a throwing handler from the others and reports it', async () => {
      const topic = uniqueTopic('throws');
      notifier.subscribe(topic, () => {
        throw new Error('handler failed');
      });
      const inbox = record(notifier, topic);
      await notifier.publish(topic, 'one');
      await notifier.publish(topic, 'two');
      await waitFor(() => inbox.messages.length === 2, 5000, 'both messages');
      assert.deepEqual(inbox.messages, ['one', 'two']);
      assert.equal(handlerErrors.length, 2);
      assert.equal(handlerErrors[0]?.topic, topic);
      assert.match(String(handlerErrors[0]?.error), /handler failed/);
    });

    it('rejects a payload over the limit and accepts one just under it', async () => {
      const topic = uniqueTopic('size');
      const inbox = record(notifier, topic);
      await assert.rejects(notifier.publish(topic, 'x'.repeat(8000)), NotifyPayloadTooLargeError);
      // The limit is in UTF-8 bytes of the encoded envelope, not in characters.
      await assert.rejects(notifier.publish(topic, '€'.repeat(2500)), NotifyPayloadTooLargeError);
      // JSON escaping counts too: a quote costs two bytes.
      await assert.rejects(notifier.publish(topic, '"'.repeat(MAX_NOTIFY_BYTES / 2)), NotifyPayloadTooLargeError);
      const overhead = JSON.stringify({ t: topic, m: '' }).length;
      const largest = 'y'.repeat(MAX_NOTIFY_BYTES - overhead);
      await notifier.publish(topic, largest);
      await assert.rejects(notifier.publish(topic, `${largest}y`), NotifyPayloadTooLargeError);
      await waitFor(() => inbox.messages.length === 1, 5000, 'largest message');
      assert.equal(inbox.messages[0], largest);
      await assert.rejects(notifier.publish('', 'no topic'), TypeError);
    });

    it('returns an unsubscribe function from onResync', () => {
      const off = notifier.onResync(() => {});
      assert.equal(typeof off, 'function');
      off();
      off();
    });

    it('fence: resolves once every message published before it has been delivered', async () => {
      const topic = uniqueTopic('fence');
      const inbox = record(notifier, topic);
      for (let round = 0; round < 20; round++) {
        await notifier.publish(topic, `m${round}`);
        await notifier.fence();
        // No waiting: the fence itself guarantees the delivery.
        assert.equal(inbox.messages.length, round + 1, `after fence ${round}`);
      }
      // Fences asked for at once all resolve, each after what was published before it.
      const many = await Promise.all(Array.from({ length: 50 }, () => notifier.fence()));
      assert.equal(many.length, 50);
    });

    it('closes cleanly: no more deliveries, publish rejects, close is idempotent', async () => {
      const topic = uniqueTopic('close');
      const inbox = record(notifier, topic);
      await notifier.publish(topic, 'before');
      await waitFor(() => inbox.messages.length === 1, 5000, 'message before close');
      await notifier.close();
      await notifier.close();
      await assert.rejects(notifier.publish(topic, 'after'), /closed/);
      await assert.rejects(notifier.fence(), /closed/);
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.deepEqual(inbox.messages, ['before']);
    });
  });
}
