import { LambdaErrors } from './errors.ts';

/**
 * A per-owner share of the isolate pool (README: Fairness; issue 17, item D). At most `perOwner`
 * invocations of one owner's lambdas run at once; up to as many more wait in arrival order for one
 * of them to end (so a short burst is absorbed, and a waiter waits at most about one wall-clock
 * limit); beyond that the invocation is refused at once with 429 `too_many_requests` and
 * `Retry-After`, as function platforms throttle a function over its concurrency. Other owners'
 * lambdas therefore find free isolates however many runaway invocations one owner starts.
 */
export class OwnerLimiter {
  private readonly running = new Map<string, number>();
  private readonly waiting = new Map<string, (() => void)[]>();

  constructor(
    readonly perOwner: number,
    readonly maxWaiting: number = perOwner,
  ) {}

  /** Resolves when the owner may run one more invocation; throws the 429 when its queue is full. */
  acquire(owner: string): Promise<void> | undefined {
    const running = this.running.get(owner) ?? 0;
    if (running < this.perOwner) {
      this.running.set(owner, running + 1);
      return undefined;
    }
    let queue = this.waiting.get(owner);
    if ((queue?.length ?? 0) >= this.maxWaiting) {
      throw LambdaErrors.ownerBusy(this.perOwner, this.maxWaiting);
    }
    if (!queue) {
      queue = [];
      this.waiting.set(owner, queue);
    }
    const q = queue;
    return new Promise<void>((resolve) => q.push(resolve));
  }

  /** Ends one invocation of the owner: its slot goes to the owner's next waiter, if any. */
  release(owner: string): void {
    const queue = this.waiting.get(owner);
    const next = queue?.shift();
    if (queue && queue.length === 0) this.waiting.delete(owner);
    if (next) return next();
    const running = (this.running.get(owner) ?? 1) - 1;
    if (running <= 0) this.running.delete(owner);
    else this.running.set(owner, running);
  }

  /** Invocations of the owner running now (for tests and metrics). */
  runningOf(owner: string): number {
    return this.running.get(owner) ?? 0;
  }
}
