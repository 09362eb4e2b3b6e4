import type { Notifier } from '../../store/notifier/types.ts';

const TOPIC = 'scheduler';

/** What changed in one scheduler: anything (streams), something may be due (reservers), gone. */
export interface Change {
  /** A task may have come due (enqueue, reschedule): waiting reservers should try again. */
  due: boolean;
  /** The scheduler was deleted. */
  deleted: boolean;
}

export type ChangeHandler = (change: Change) => void;

/**
 * Change notifications per scheduler, across instances through the notifier. Changes made in
 * one turn of the event loop are coalesced into one message per scheduler, so a burst of
 * enqueues costs one notification, not one each.
 */
export class SchedulerEvents {
  private readonly handlers = new Map<string, Set<ChangeHandler>>();
  private pending = new Map<string, Change>();
  private flushing = false;
  private readonly unsubscribe: () => void;
  private readonly unresync: () => void;

  constructor(
    private readonly notifier: Notifier,
    private readonly onError: (error: unknown) => void,
  ) {
    this.unsubscribe = notifier.subscribe(TOPIC, (message) => {
      let parsed: { s?: unknown; w?: unknown; d?: unknown };
      try {
        parsed = JSON.parse(message) as typeof parsed;
      } catch {
        return;
      }
      if (typeof parsed.s !== 'string') return;
      this.deliver(parsed.s, { due: parsed.w === 1, deleted: parsed.d === 1 });
    });
    // Messages may have been lost while the notifier reconnected: everyone looks again.
    this.unresync = notifier.onResync(() => {
      for (const id of [...this.handlers.keys()]) this.deliver(id, { due: true, deleted: false });
    });
  }

  /** Records a change to publish at the end of this turn. */
  changed(schedulerId: string, change: Partial<Change> = {}): void {
    const current = this.pending.get(schedulerId) ?? { due: false, deleted: false };
    current.due ||= change.due ?? false;
    current.deleted ||= change.deleted ?? false;
    this.pending.set(schedulerId, current);
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(() => {
      this.flushing = false;
      const batch = this.pending;
      this.pending = new Map();
      for (const [id, c] of batch) {
        this.notifier
          .publish(TOPIC, JSON.stringify({ s: id, w: c.due ? 1 : 0, d: c.deleted ? 1 : 0 }))
          .catch(this.onError);
      }
    });
  }

  listen(schedulerId: string, handler: ChangeHandler): () => void {
    let set = this.handlers.get(schedulerId);
    if (!set) {
      set = new Set();
      this.handlers.set(schedulerId, set);
    }
    const entry: ChangeHandler = (change) => handler(change);
    set.add(entry);
    return () => {
      const current = this.handlers.get(schedulerId);
      if (!current) return;
      current.delete(entry);
      if (current.size === 0) this.handlers.delete(schedulerId);
    };
  }

  private deliver(schedulerId: string, change: Change): void {
    const set = this.handlers.get(schedulerId);
    if (!set) return;
    for (const handler of [...set]) {
      try {
        handler(change);
      } catch (error) {
        this.onError(error);
      }
    }
  }

  close(): void {
    this.unsubscribe();
    this.unresync();
    this.handlers.clear();
  }
}
