import { HttpError } from '../core/errors.ts';

/**
 * Errors that say the database could not be reached or went away, not that the statement was
 * wrong: the network (refused, reset, timed out, name not resolved), node-postgres losing its
 * connection, and PostgreSQL's SQLSTATE class 08 (connection exception) and 57P01–57P03 (the server
 * shutting down, crashed or still starting).
 */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
]);
const SERVER_GONE_CODES = new Set(['57P01', '57P02', '57P03']);
const CLIENT_GONE_MESSAGES = [
  'Connection terminated',
  'Client has encountered a connection error and is not queryable',
  'timeout exceeded when trying to connect',
];

export function isUnreachable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || SERVER_GONE_CODES.has(code) || code.startsWith('08')))
    return true;
  if (CLIENT_GONE_MESSAGES.some((message) => error.message.startsWith(message))) return true;
  // Node's happy-eyeballs connect reports every address's failure together.
  return error instanceof AggregateError && error.errors.some(isUnreachable);
}

/**
 * Answered 503 with `Retry-After` instead of a 500: the request did nothing wrong, and a client (or
 * a load balancer's retry) that tries again once the database is back succeeds. The readiness
 * endpoint says `store_unreachable` meanwhile. The message never carries the driver's text (it can
 * name hosts and users).
 */
export class StoreUnreachableError extends HttpError {
  constructor(cause: unknown) {
    super(503, 'store_unreachable', 'the database cannot be reached; try again shortly', { 'retry-after': '1' });
    this.name = 'StoreUnreachableError';
    this.cause = cause;
  }
}

/** `error` as a `StoreUnreachableError` when it says the database is unreachable, else unchanged. */
export function asUnreachable(error: unknown): unknown {
  return isUnreachable(error) ? new StoreUnreachableError(error) : error;
}

/** Rethrows a rejection of `promise` as `asUnreachable` does. */
export function reachable<T>(promise: Promise<T>): Promise<T> {
  return promise.catch((error: unknown) => {
    throw asUnreachable(error);
  });
}
