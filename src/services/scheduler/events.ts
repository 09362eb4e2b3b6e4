import type { Notifier } from '../../store/notifier/types.ts';

const TOPIC = 'scheduler';

/** What changed in one scheduler: anything (streams), something may be due (reservers), gone. */
export interface Change {
  /** A task may have come due (enqueue, reschedule): waiting reservers should try again. */
  due: boolean;
  /** The scheduler was deleted. */
  deleted: boolean;
  /** Its delivery target or retry policy changed (README: Delivery): delivery engines read it again. */
  retarget: boolean;
}

export type ChangeHandler = (change: Change) => void;
export type AnyChangeHandler = (schedulerId: string, change: Change) => void;

/**
 * A change that only streams care about (a claim, an acknowledge, an extend) is published at most
 * once per this interval per scheduler: the first at once, the ones after it together at the
 * interval's end. Each publish is a commit of its own on PostgreSQL, and streams send at most one
 * snapshot per 250 ms anyway (README: Waking).
 */
const QUIET_INTERVAL_MS = 50;

/**
 * Change notifications per scheduler, across instances through the notifier. Changes made in
 * one turn of the event loop are coalesced into one message per scheduler, so a burst of
 * enqueues costs one notification, not one each; changes that wake no reserver are further
 * coalesced over QUIET_INTERVAL_MS.
 */
export class SchedulerEvents {
  private readonly handlers = new Map<string, Set<ChangeHandler>>();
  /** Told of every scheduler's changes (the delivery engine). */
  private readonly everyHandlers = new Set<AnyChangeHandler>();
  private pending = new Map<string, Change>();
  private flushing = false;
  /** When each scheduler's last message went out (schedulers with a recent one only). */
  private readonly published = new Map<string, number>();
  /** Quiet changes held until their scheduler's interval ends. */
  private readonly held = new Map<string, NodeJS.Timeout>();
  private readonly unsubscribe: () => void;
  private readonly unresync: () => void;

  constructor(
    private readonly notifier: Notifier,
    private readonly onError: (error: unknown) => void,
  ) {
    this.unsubscribe = notifier.subscribe(TOPIC, (message) => {
      let parsed: { s?: unknown; w?: unknown; d?: unknown; t?: unknown };
      try {
        parsed = JSON.parse(message) as typeof parsed;
      } catch {
        return;
      }
      if (typeof parsed.s !== 'string') return;
      this.deliver(parsed.s, { due: parsed.w === 1, deleted: parsed.d === 1, retarget: parsed.t === 1 });
    });
    // Messages may have been lost while the notifier reconnected: everyone looks again.
    this.unresync = notifier.onResync(() => {
      for (const id of [...this.handlers.keys()]) this.deliver(id, { due: true, deleted: false, retarget: false });
      for (const handler of [...this.everyHandlers]) handler('', { due: true, deleted: false, retarget: true });
    });
  }

  /** Records a change to publish at the end of this turn, or a quiet one at the end of its scheduler's interval. */
  changed(schedulerId: string, change: Partial<Change> = {}): void {
    const current = this.pending.get(schedulerId) ?? { due: false, deleted: false, retarget: false };
    current.due ||= change.due ?? false;
    current.deleted ||= change.deleted ?? false;
    current.retarget ||= change.retarget ?? false;
    this.pending.set(schedulerId, current);
    const quiet = !current.due && !current.deleted;
    if (quiet && this.held.has(schedulerId)) return;
    // A change that wakes reservers goes out this turn, with the quiet ones held before it.
    clearTimeout(this.held.get(schedulerId));
    this.held.delete(schedulerId);
    const wait = quiet ? (this.published.get(schedulerId) ?? -Infinity) + QUIET_INTERVAL_MS - performance.now() : 0;
    if (wait > 0) {
      this.held.set(
        schedulerId,
        setTimeout(() => {
          this.held.delete(schedulerId);
          this.publish(schedulerId);
        }, wait),
      );
      return;
    }
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(() => {
      this.flushing = false;
      for (const id of [...this.pending.keys()]) if (!this.held.has(id)) this.publish(id);
    });
  }

  private publish(schedulerId: string): void {
    const change = this.pending.get(schedulerId);
    if (!change) return;
    this.pending.delete(schedulerId);
    clearTimeout(this.held.get(schedulerId));
    this.held.delete(schedulerId);
    const now = performance.now();
    // Only recent times matter: older ones are dropped once there are many.
    if (this.published.size >= 1024)
      for (const [id, at] of this.published) if (now - at >= QUIET_INTERVAL_MS) this.published.delete(id);
    this.published.set(schedulerId, now);
    this.notifier
      .publish(
        TOPIC,
        JSON.stringify({
          s: schedulerId,
          w: change.due ? 1 : 0,
          d: change.deleted ? 1 : 0,
          ...(change.retarget ? { t: 1 } : {}),
        }),
      )
      .catch(this.onError);
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

  /** Every scheduler's changes; a resync of the notifier is told as a retarget of scheduler ''. */
  listenAll(handler: AnyChangeHandler): () => void {
    this.everyHandlers.add(handler);
    return () => this.everyHandlers.delete(handler);
  }

  private deliver(schedulerId: string, change: Change): void {
    for (const handler of [...this.everyHandlers]) {
      try {
        handler(schedulerId, change);
      } catch (error) {
        this.onError(error);
      }
    }
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
    for (const timer of this.held.values()) clearTimeout(timer);
    this.held.clear();
    this.unsubscribe();
    this.unresync();
    this.handlers.clear();
    this.everyHandlers.clear();
  }
}
