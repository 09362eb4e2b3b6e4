/** A task run one at a time (see `coalesced`). */
export interface Coalesced {
  /** Runs the task, or asks for one more run after the one in progress. */
  run(): Promise<void>;
  /** Settles once no run is in progress or asked for (starts none). */
  idle(): Promise<void>;
}

/**
 * Runs `task` one at a time: a call while it runs asks for one more run after it, however many
 * calls came meanwhile (a burst of commits costs one notification, a burst of state changes one
 * lease renewal). The task handles its own errors.
 */
export function coalesced(task: () => Promise<void>): Coalesced {
  let running: Promise<void> | undefined;
  let again = false;
  const start = (): Promise<void> => {
    running = task().finally(() => {
      running = undefined;
      if (again) {
        again = false;
        void start();
      }
    });
    return running;
  };
  return {
    run() {
      if (!running) return start();
      again = true;
      return running;
    },
    async idle() {
      while (running) await running.catch(() => {});
    },
  };
}
