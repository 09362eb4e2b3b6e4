import type { FastifyBaseLogger } from 'fastify';
import type { SqlConnection } from '../../store/db.ts';
import { deleteExpiredSessions, deleteExpiredSsoStates, deleteLoginAttemptsBefore } from './repository.ts';
import { LOGIN_WINDOW_MS } from './throttle.ts';

/** How often expired sessions, SSO states and throttling counters are deleted. */
export const SWEEP_INTERVAL_MS = 10 * 60 * 1000;

/** Deletes everything that has expired; returns the counts. Expired rows are already ignored by every read. */
export async function sweepExpired(
  connection: SqlConnection,
  now: number = Date.now(),
): Promise<{ sessions: number; ssoStates: number; loginCounters: number }> {
  const sessions = await deleteExpiredSessions(connection, now);
  const ssoStates = await deleteExpiredSsoStates(connection, now);
  const loginCounters = await deleteLoginAttemptsBefore(connection, now - LOGIN_WINDOW_MS);
  return { sessions, ssoStates, loginCounters };
}

/**
 * Runs `sweepExpired` every `intervalMs` on an unref'd timer (it never keeps the process alive).
 * The returned stop function clears the timer and waits for a sweep in progress, so the store can
 * be closed right after it.
 */
export function startSweeper(
  connection: SqlConnection,
  logger: FastifyBaseLogger,
  intervalMs: number = SWEEP_INTERVAL_MS,
): () => Promise<void> {
  let running: Promise<void> | null = null;
  const timer = setInterval(() => {
    if (running) return;
    running = sweepExpired(connection)
      .then((counts) => {
        if (counts.sessions + counts.ssoStates + counts.loginCounters > 0)
          logger.debug(counts, 'expired auth rows deleted');
      })
      .catch((error: unknown) => logger.warn({ err: error }, 'could not delete expired auth rows'))
      .finally(() => {
        running = null;
      });
  }, intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    if (running) await running;
  };
}
