import type { HttpError } from '../../core/errors.ts';
import type { SqlConnection } from '../../store/db.ts';
import { AuthErrors } from './errors.ts';
import { clearLoginAttempts, findLoginAttempts, recordLoginAttempt, type LoginAttempts } from './repository.ts';

/** Password attempts allowed per email in one window. */
export const MAX_LOGIN_ATTEMPTS = 10;
/** The window, counted from the first attempt that opened it. */
export const LOGIN_WINDOW_MS = 15 * 60 * 1000;

function tooManyAttempts(counter: LoginAttempts, now: number): HttpError {
  const seconds = Math.max(1, Math.ceil((counter.windowStartedAt + LOGIN_WINDOW_MS - now) / 1000));
  return AuthErrors.tooManyLogins(seconds);
}

/**
 * Failed-login throttling per normalised email (known or unknown alike, so the answer never tells
 * whether an account exists), with the counters in the database so that every instance shares
 * them. An attempt is counted before the password is checked, so concurrent guesses cannot slip
 * past the limit; a successful login clears the counter.
 */
export class LoginThrottle {
  private readonly connection: SqlConnection;

  constructor(connection: SqlConnection) {
    this.connection = connection;
  }

  /** Counts an attempt, or throws 429 `too_many_requests` (with `Retry-After`) when the email is locked. */
  async attempt(email: string, now: number = Date.now()): Promise<void> {
    const current = await findLoginAttempts(this.connection, email);
    const open = current !== null && current.windowStartedAt > now - LOGIN_WINDOW_MS;
    // A locked email is answered without a write, so a flood of guesses costs one read each.
    if (open && current.attempts >= MAX_LOGIN_ATTEMPTS) throw tooManyAttempts(current, now);
    const counted = await recordLoginAttempt(this.connection, email, LOGIN_WINDOW_MS, now);
    if (counted.attempts > MAX_LOGIN_ATTEMPTS) throw tooManyAttempts(counted, now);
  }

  /** The password was right: the email starts with a clean slate. */
  async succeeded(email: string): Promise<void> {
    await clearLoginAttempts(this.connection, email);
  }
}
