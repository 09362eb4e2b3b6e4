import { setImmediate as nextTurn } from 'node:timers/promises';

/** Work done on the event loop before it gets a turn (SECURITY.md: no request holds it longer). */
export const TURN_MS = 5;

/**
 * Gives the event loop a turn once the work since the last turn has taken TURN_MS: call
 * `await pacer.pace()` between pieces of work, or `if (pacer.due) await pacer.turn()` to create no
 * promise when no turn is due. Used by every loop whose length a request decides (docdb
 * traversals, log matching, scheduler scans on SQLite).
 */
export class Pacer {
  private since = performance.now();

  get due(): boolean {
    return performance.now() - this.since >= TURN_MS;
  }

  async turn(): Promise<void> {
    await nextTurn();
    this.since = performance.now();
  }

  async pace(): Promise<void> {
    if (this.due) await this.turn();
  }
}
