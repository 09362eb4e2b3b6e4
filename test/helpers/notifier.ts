import type { Store } from '../../src/store/index.ts';

/**
 * Resolves with the first message on `topic` that `accept` takes; rejects after `timeoutMs`.
 * Subscribe before triggering the change.
 */
export function nextMessage(
  store: Pick<Store, 'notifier'>,
  topic: string,
  accept: (message: unknown) => boolean,
  timeoutMs = 3000,
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      unsubscribe();
      reject(new Error(`no matching message on ${topic} within ${timeoutMs} ms`));
    }, timeoutMs);
    const unsubscribe = store.notifier.subscribe(topic, (text) => {
      const message: unknown = JSON.parse(text);
      if (!accept(message)) return;
      clearTimeout(timer);
      unsubscribe();
      resolve(message);
    });
  });
}
