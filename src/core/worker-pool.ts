import { performance } from 'node:perf_hooks';
import { Worker, type TransferListItem } from 'node:worker_threads';

/** A job ran past its time limit: its worker was stopped (and is replaced for the next job). */
export class WorkerTimeLimitError extends Error {
  override readonly name = 'WorkerTimeLimitError';
}

interface Job {
  message: unknown;
  transfer: readonly TransferListItem[];
  limitMs: number;
  resolve(reply: unknown): void;
  reject(error: Error): void;
}

interface Slot {
  worker: Worker;
  job: Job | null;
  timer: NodeJS.Timeout | undefined;
  /** When the slot last finished a job (performance.now()). */
  idleSince: number;
}

/** How long a worker may sit without a job before it ends (each holds a V8 heap of its own). */
export const WORKER_IDLE_MS = 10_000;

/**
 * Starts the worker module `file`, a sibling of the module whose `import.meta.url` is `base`: the
 * `.ts` source through tsx when the service runs from source, the compiled `.js` otherwise. Through
 * a `data:` URL with absolute imports, so it does not depend on the working directory.
 */
export function startWorker(base: string, file: string): Worker {
  if (!base.endsWith('.ts')) return new Worker(new URL(`./${file}.js`, base));
  const entry = new URL(`./${file}.ts`, base).href;
  const code = `import { tsImport } from ${JSON.stringify(import.meta.resolve('tsx/esm/api'))};\nawait tsImport(${JSON.stringify(entry)}, ${JSON.stringify(base)});`;
  return new Worker(new URL(`data:text/javascript,${encodeURIComponent(code)}`));
}

/**
 * A few worker threads that take jobs first come, first served (a caller that keeps at most a
 * couple of jobs queued lets concurrent callers take turns). Workers start on first use and do not
 * keep the process alive. A job that runs past its time limit has its worker terminated and fails
 * with WorkerTimeLimitError; a worker that dies fails its job and is replaced on the next one. A
 * worker idle for `idleMs` ends (each holds a V8 heap and its thread's malloc arena), and
 * starts again on the next job; a burst's workers then do not stay resident for good. Used by the
 * document database's filters and the logs service's matching.
 */
export class WorkerPool {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private closed = false;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly spawn: () => Worker,
    private readonly size: number,
    private readonly idleMs = WORKER_IDLE_MS,
  ) {}

  /** Workers alive (for tests). */
  get workerCount(): number {
    return this.slots.length;
  }

  /** Posts `message` (moving `transfer`) to the next free worker; resolves with its reply. */
  run<T>(message: unknown, transfer: readonly TransferListItem[], limitMs: number): Promise<T> {
    if (this.closed) return Promise.reject(new Error('worker pool closed'));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ message, transfer, limitMs, resolve: resolve as (reply: unknown) => void, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.queue.length > 0 && !this.closed) {
      let slot = this.slots.find((candidate) => candidate.job === null);
      if (!slot) {
        if (this.slots.length >= this.size) return;
        slot = this.add();
      }
      const job = this.queue.shift()!;
      const running = slot;
      running.job = job;
      running.timer = setTimeout(() => this.expire(running), job.limitMs);
      running.worker.postMessage(job.message, job.transfer);
    }
  }

  private add(): Slot {
    const slot: Slot = { worker: this.spawn(), job: null, timer: undefined, idleSince: performance.now() };
    slot.worker.unref();
    slot.worker.on('message', (reply: unknown) => {
      const job = slot.job;
      clearTimeout(slot.timer);
      slot.job = null;
      slot.idleSince = performance.now();
      job?.resolve(reply);
      this.pump();
      this.sweepLater();
    });
    slot.worker.on('error', (error: Error) => this.retire(slot, error));
    slot.worker.on('exit', () => this.retire(slot, new Error('worker thread exited')));
    this.slots.push(slot);
    return slot;
  }

  /** Takes the slot out of the pool and fails its job, if any. */
  private retire(slot: Slot, error: Error): void {
    const at = this.slots.indexOf(slot);
    if (at !== -1) this.slots.splice(at, 1);
    clearTimeout(slot.timer);
    const job = slot.job;
    slot.job = null;
    job?.reject(error);
    this.pump();
  }

  private expire(slot: Slot): void {
    const limit = slot.job?.limitMs ?? 0;
    this.retire(slot, new WorkerTimeLimitError(`stopped after ${limit} ms`));
    void slot.worker.terminate();
  }

  /** Ends the workers idle for idleMs, then waits for the next one to be. */
  private sweepLater(): void {
    if (this.sweeper || this.closed) return;
    const idle = this.slots.filter((slot) => slot.job === null);
    if (idle.length === 0) return;
    const oldest = Math.min(...idle.map((slot) => slot.idleSince));
    this.sweeper = setTimeout(
      () => {
        this.sweeper = undefined;
        const cutoff = performance.now() - this.idleMs;
        for (const slot of this.slots.filter((candidate) => candidate.job === null && candidate.idleSince <= cutoff)) {
          this.slots.splice(this.slots.indexOf(slot), 1);
          void slot.worker.terminate();
        }
        this.sweepLater();
      },
      Math.max(0, oldest + this.idleMs - performance.now()),
    );
    this.sweeper.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.sweeper);
    for (const job of this.queue.splice(0)) job.reject(new Error('worker pool closed'));
    const slots = this.slots.splice(0);
    for (const slot of slots) {
      clearTimeout(slot.timer);
      slot.job?.reject(new Error('worker pool closed'));
      slot.job = null;
    }
    await Promise.all(slots.map((slot) => slot.worker.terminate()));
  }
}
