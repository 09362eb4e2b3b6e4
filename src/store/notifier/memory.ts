import { encodeEnvelope, reportHandlerError, TopicRegistry, type Notifier, type NotifierOptions } from './types.ts';

/**
 * The embedded-mode notifier: one process, so fan-out is a map of handlers. Delivery is deferred
 * with `setImmediate` so a publisher never re-enters subscribers synchronously (and handler code
 * cannot run in the middle of the publisher's own bookkeeping). Messages arrive in publish order.
 */
export function createMemoryNotifier(options: NotifierOptions = {}): Notifier {
  const registry = new TopicRegistry(options.onHandlerError ?? reportHandlerError);
  let closed = false;

  return {
    async publish(topic, message) {
      if (closed) throw new Error('notifier is closed');
      // Same limit as PostgreSQL, so code that works embedded keeps working scaled out.
      encodeEnvelope(topic, message);
      setImmediate(() => {
        if (!closed) registry.deliver(topic, message);
      });
    },
    subscribe(topic, handler) {
      if (closed) return () => {};
      return registry.subscribe(topic, handler);
    },
    crossInstance: false,
    fence() {
      if (closed) return Promise.reject(new Error('notifier is closed'));
      // Deliveries are queued with setImmediate in publish order: one more turn runs them all.
      return new Promise<void>((resolve) => setImmediate(resolve));
    },
    onResync(handler) {
      // A single process never misses its own messages, so this never fires; kept for the contract.
      if (closed) return () => {};
      return registry.onResync(handler);
    },
    async close() {
      closed = true;
      registry.clear();
    },
  };
}
