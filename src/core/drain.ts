// The drain notice: how a long-lived response learns that its instance is shutting down (root
// README.md, Running on PostgreSQL: Rolling restarts). The listener that accepted a request
// attaches its notice to the raw request; a stream or long-poll registers a callback and ends in
// a way the client can resume (an SSE stream ends, a waiting reserve answers 204, a follow stream
// ends with its cursor). A request without a notice (app.inject, tests) is never drained.

import type { IncomingMessage } from 'node:http';

const NOTICE = Symbol('stratus.drainNotice');

/** One listener's drain state: `start()` once; callbacks registered afterwards run at once (next tick). */
export class DrainNotice {
  #draining = false;
  readonly #callbacks = new Set<() => void>();

  get draining(): boolean {
    return this.#draining;
  }

  /** Marks the drain and calls every registered callback once. Idempotent. */
  start(): void {
    if (this.#draining) return;
    this.#draining = true;
    const callbacks = [...this.#callbacks];
    this.#callbacks.clear();
    for (const callback of callbacks) callback();
  }

  /** Calls `callback` when the drain starts (on the next tick if it already has); returns the unsubscribe. */
  on(callback: () => void): () => void {
    if (this.#draining) {
      let cancelled = false;
      process.nextTick(() => {
        if (!cancelled) callback();
      });
      return () => {
        cancelled = true;
      };
    }
    const entry = () => callback();
    this.#callbacks.add(entry);
    return () => this.#callbacks.delete(entry);
  }
}

/** Attaches the listener's notice to a request it accepted. */
export function attachDrainNotice(request: IncomingMessage, notice: DrainNotice): void {
  (request as IncomingMessage & { [NOTICE]?: DrainNotice })[NOTICE] = notice;
}

/** Whether the instance that accepted `request` is draining (false when it has no notice). */
export function isDraining(request: IncomingMessage | undefined): boolean {
  return (request as (IncomingMessage & { [NOTICE]?: DrainNotice }) | undefined)?.[NOTICE]?.draining ?? false;
}

/**
 * Calls `callback` once when the instance that accepted `request` starts draining (at once, on the
 * next tick, if it already is). Returns the unsubscribe; call it when the response ends.
 */
export function onDrain(request: IncomingMessage | undefined, callback: () => void): () => void {
  const notice = (request as (IncomingMessage & { [NOTICE]?: DrainNotice }) | undefined)?.[NOTICE];
  return notice ? notice.on(callback) : () => {};
}
