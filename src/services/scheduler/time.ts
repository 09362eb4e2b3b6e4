import { DurationError, parseDurationMs } from '../../core/duration.ts';
import { SchedulerErrors } from './errors.ts';

/** Outputs are whole seconds, truncated (README: output timestamps); arithmetic keeps milliseconds. */
export function formatTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** An RFC 3339 time with any offset and fraction, as epoch milliseconds (fraction beyond ms dropped). */
export function parseTime(field: string, text: string): number {
  const match = RFC3339.exec(text);
  const ms = match ? Date.parse(text.replace(/(\.\d{3})\d+/, '$1')) : NaN;
  if (
    !match ||
    Number.isNaN(ms) ||
    Number(match[2]) > 12 ||
    Number(match[3]) > 31 ||
    Number(match[4]) > 23 ||
    Number(match[5]) > 59 ||
    Number(match[6]) > 60
  ) {
    throw SchedulerErrors.invalidTime(field);
  }
  return ms;
}

/** A Go duration as milliseconds; 400 validation_error when it is not one. */
export function parseDuration(field: string, text: string): number {
  try {
    return parseDurationMs(text);
  } catch (error) {
    if (error instanceof DurationError) throw SchedulerErrors.invalidDuration(field, error.message);
    throw error;
  }
}

/** The longest lease a reserve may take (README: maximum worktime). */
export const MAX_WORKTIME_MS = 24 * 3600 * 1000;
/** The latest instant the service stores: far beyond any real use, well inside Date's range. */
export const MAX_TIME_MS = Date.UTC(9999, 11, 31, 23, 59, 59);

export const MIN_TIME_MS = -62_135_596_800_000; // 0001-01-01T00:00:00Z

/** The due time of `delay` / `future` (exactly one or neither); undefined when neither is given. */
export function dueTime(body: { delay?: string; future?: string }, now: number): number | undefined {
  if (body.delay !== undefined && body.future !== undefined) throw SchedulerErrors.delayAndFuture();
  let due: number | undefined;
  if (body.delay !== undefined) due = now + parseDuration('delay', body.delay);
  else if (body.future !== undefined) due = parseTime('future', body.future);
  if (due !== undefined && (due > MAX_TIME_MS || due < MIN_TIME_MS)) throw SchedulerErrors.dueTimeOutOfRange();
  return due;
}
