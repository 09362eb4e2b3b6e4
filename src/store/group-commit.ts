/**
 * Concurrent calls of one kind of write gathered into batches: while `maxInFlight` batches are
 * being written, new calls wait, and the next batch takes all of them (up to `maxBatch`) at once.
 * An idle caller goes alone and at once; under load many calls share one statement and one commit.
 *
 * Why: on PostgreSQL each autocommit statement costs a round trip, a parse-plan-execute and a WAL
 * flush, and on a small machine that (not the data) bounds how many small writes go through; one
 * multi-row statement of 20 rows costs little more than one of one row. Where writes already share
 * commits (`SqlDatabase.writesShareCommits`, SQLite) a caller lets every call go at once
 * (`maxInFlight` infinite): waiting for a batch in flight would only add the commit interval.
 */
export interface GroupCommitOptions {
  /** Most calls written in one batch. */
  readonly maxBatch: number;
  /** Most batches being written at once; fewer make bigger batches, more use more connections. */
  readonly maxInFlight: number;
  /** Told of every batch written: how many calls it held and how long the write took (metrics). */
  readonly observe?: (calls: number, seconds: number) => void;
}

/**
 * Where a database reports the batches its writes shared (the platform's metrics, src/metrics):
 * the group (`sqlite_transaction`, `scheduler_enqueue`, …), the calls and the seconds.
 */
export type CommitObserver = (group: string, calls: number, seconds: number) => void;

/** One call's outcome in a batch: its own value or its own error. */
export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** What `work` comes to, as a `Settled`. */
export async function settle<T>(work: Promise<T>): Promise<Settled<T>> {
  try {
    return { ok: true, value: await work };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * The usual write of a `GroupCommit` batch: the first call of each key (when there are two or
 * more) is written together by `together`, which answers an output for each or `undefined` where
 * that call must be decided alone; the rest (a key repeated in the batch, an undecided call, and
 * every call when `together` throws) go one by one through `alone`, in order, so each caller gets
 * the outcome a write of its own would have had.
 */
export async function togetherThenAlone<In, Out>(
  inputs: readonly In[],
  ways: {
    key(input: In): string;
    together(firsts: readonly In[]): Promise<readonly (Out | undefined)[]>;
    alone(input: In): Promise<Out>;
    /** Told when `together` failed as a whole (its calls then went alone). */
    onTogetherFailed?(error: unknown): void;
  },
): Promise<Settled<Out>[]> {
  const outcomes: (Settled<Out> | undefined)[] = inputs.map(() => undefined);
  const seen = new Set<string>();
  const firsts: number[] = [];
  for (const [n, input] of inputs.entries()) {
    const key = ways.key(input);
    if (seen.has(key)) continue;
    seen.add(key);
    firsts.push(n);
  }
  if (firsts.length > 1) {
    try {
      const outputs = await ways.together(firsts.map((n) => inputs[n]!));
      firsts.forEach((n, i) => {
        const output = outputs[i];
        if (output !== undefined) outcomes[n] = { ok: true, value: output };
      });
    } catch (error) {
      ways.onTogetherFailed?.(error);
    }
  }
  for (const [n, input] of inputs.entries()) outcomes[n] ??= await settle(ways.alone(input));
  return outcomes as Settled<Out>[];
}

interface Waiting<In, Out> {
  readonly input: In;
  resolve(output: Out): void;
  reject(error: unknown): void;
}

export class GroupCommit<In, Out> {
  readonly #write: (inputs: readonly In[]) => Promise<readonly Settled<Out>[]>;
  readonly #options: GroupCommitOptions;
  readonly #waiting: Waiting<In, Out>[] = [];
  #inFlight = 0;

  /**
   * `write` answers one outcome per input, in their order, each settling its own call (a batch
   * redone item by item gives each caller what it alone would have had); if `write` throws, every
   * call of the batch fails with it.
   */
  constructor(write: (inputs: readonly In[]) => Promise<readonly Settled<Out>[]>, options: GroupCommitOptions) {
    if (options.maxBatch < 1 || options.maxInFlight < 1) throw new RangeError('maxBatch and maxInFlight must be ≥ 1');
    this.#write = write;
    this.#options = options;
  }

  submit(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.#waiting.push({ input, resolve, reject });
      this.#next();
    });
  }

  #next(): void {
    while (this.#inFlight < this.#options.maxInFlight && this.#waiting.length > 0) {
      const batch = this.#waiting.splice(0, this.#options.maxBatch);
      this.#inFlight++;
      void this.#settle(batch);
    }
  }

  async #settle(batch: readonly Waiting<In, Out>[]): Promise<void> {
    try {
      const started = performance.now();
      const outputs = await this.#write(batch.map((call) => call.input));
      this.#options.observe?.(batch.length, (performance.now() - started) / 1000);
      if (outputs.length !== batch.length)
        throw new Error(`group commit: ${outputs.length} outputs for ${batch.length} inputs`);
      batch.forEach((call, i) => {
        const outcome = outputs[i]!;
        if (outcome.ok) call.resolve(outcome.value);
        else call.reject(outcome.error);
      });
    } catch (error) {
      for (const call of batch) call.reject(error);
    } finally {
      this.#inFlight--;
      this.#next();
    }
  }
}
