export type NotifyHandler = (message: string) => void;

export interface Notifier {
  /**
   * Publishes to every subscriber of `topic` on every instance (including this one). Payload is a
   * string (callers JSON-encode). The encoded envelope must fit `MAX_NOTIFY_BYTES`
   * (PostgreSQL's NOTIFY limit is 8000 bytes); larger messages are rejected with an Error.
   */
  publish(topic: string, message: string): Promise<void>;
  /** Subscribes; returns an unsubscribe function. Handlers always run asynchronously. */
  subscribe(topic: string, handler: NotifyHandler): () => void;
  /**
   * Called after the notifier lost its connection and re-established it: messages may have been
   * missed, so subscribers should reload state (drop caches). Returns an unsubscribe function.
   */
  onResync(handler: () => void): () => void;
  /**
   * True when other processes publish here too (PostgreSQL): what a subscriber caches may be stale
   * until the messages already sent have arrived, so a cache `fence`s before it trusts an entry.
   */
  readonly crossInstance: boolean;
  /**
   * Resolves once every message whose `publish` had settled, on any instance, before this call
   * has been delivered to this instance's subscribers: a read that follows sees every change
   * announced before it began. Rejects when that cannot be known (the listening connection is
   * being re-established); the caller then reads the database instead of what it caches.
   */
  fence(): Promise<void>;
  close(): Promise<void>;
}

// The kernel's helper, re-exported for the store's users (a Notifier is a FencedFeed).
export { caughtUp } from '../../core/caught-up.ts';

export interface NotifierOptions {
  /** Where a throwing handler's error goes; it never reaches the publisher or other handlers. */
  onHandlerError?: (error: unknown, topic: string) => void;
}

/** The largest encoded envelope (`{"t":topic,"m":message}` in UTF-8) that `publish` accepts. */
export const MAX_NOTIFY_BYTES = 7000;

export class NotifyPayloadTooLargeError extends Error {
  readonly code = 'notify_payload_too_large';
  constructor(readonly bytes: number) {
    super(`notification of ${bytes} bytes exceeds the limit of ${MAX_NOTIFY_BYTES} bytes`);
    this.name = 'NotifyPayloadTooLargeError';
  }
}

/**
 * The wire form of one notification. Every adapter checks the same limit on the same encoding, so
 * a message that works in embedded mode does not start failing on PostgreSQL. JSON escapes NUL
 * and lone surrogates, which PostgreSQL text could not carry.
 */
export function encodeEnvelope(topic: string, message: string): string {
  if (typeof topic !== 'string' || topic === '') throw new TypeError('topic must be a non-empty string');
  if (typeof message !== 'string') throw new TypeError('message must be a string');
  const payload = JSON.stringify({ t: topic, m: message });
  const bytes = Buffer.byteLength(payload, 'utf8');
  if (bytes > MAX_NOTIFY_BYTES) throw new NotifyPayloadTooLargeError(bytes);
  return payload;
}

/** The inverse of `encodeEnvelope`; null for anything malformed (it came over the network). */
export function decodeEnvelope(payload: string): { topic: string; message: string } | null {
  try {
    const value: unknown = JSON.parse(payload);
    if (typeof value !== 'object' || value === null) return null;
    const { t, m } = value as { t?: unknown; m?: unknown };
    return typeof t === 'string' && typeof m === 'string' ? { topic: t, message: m } : null;
  } catch {
    return null;
  }
}

/** Default for `onHandlerError`: visible, but never fatal. */
export function reportHandlerError(error: unknown, topic: string): void {
  const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.emitWarning(`notifier handler for topic "${topic}" threw: ${detail}`, 'NotifierHandlerWarning');
}

/**
 * Local fan-out shared by the adapters: topic → handlers. Delivery is checked against the live
 * set, so a handler unsubscribed after a publish but before delivery is not called.
 */
export class TopicRegistry {
  private readonly topics = new Map<string, Set<NotifyHandler>>();
  private readonly resyncHandlers = new Set<() => void>();

  constructor(private readonly onHandlerError: (error: unknown, topic: string) => void) {}

  subscribe(topic: string, handler: NotifyHandler): () => void {
    let handlers = this.topics.get(topic);
    if (!handlers) {
      handlers = new Set();
      this.topics.set(topic, handlers);
    }
    // A wrapper per subscription, so the same function subscribed twice is two subscriptions.
    const entry: NotifyHandler = (message) => handler(message);
    handlers.add(entry);
    return () => {
      const current = this.topics.get(topic);
      if (!current) return;
      current.delete(entry);
      if (current.size === 0) this.topics.delete(topic);
    };
  }

  onResync(handler: () => void): () => void {
    const entry = () => handler();
    this.resyncHandlers.add(entry);
    return () => {
      this.resyncHandlers.delete(entry);
    };
  }

  /** Calls every current handler of `topic`; the caller makes sure this runs asynchronously. */
  deliver(topic: string, message: string): void {
    const handlers = this.topics.get(topic);
    if (!handlers) return;
    for (const handler of [...handlers]) {
      if (!handlers.has(handler)) continue;
      try {
        handler(message);
      } catch (error) {
        this.onHandlerError(error, topic);
      }
    }
  }

  resync(): void {
    for (const handler of [...this.resyncHandlers]) {
      try {
        handler();
      } catch (error) {
        this.onHandlerError(error, '(resync)');
      }
    }
  }

  clear(): void {
    this.topics.clear();
    this.resyncHandlers.clear();
  }
}
