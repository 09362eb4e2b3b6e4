import { CronExpressionParser } from 'cron-parser';
import { rfc3339 } from '../../core/ids.ts';
import type { CronTrigger } from '../../core/trigger.ts';
import type { Notifier } from '../../store/notifier/types.ts';
import { LAMBDA_CHANGED_TOPIC, type Lambda, type LambdaRepository } from './repository.ts';

/** Longest schedule expression and time zone name accepted (README: Cron schedules). */
export const MAX_SCHEDULE_LENGTH = 256;
export const MAX_SCHEDULE_TZ_LENGTH = 64;

/**
 * The nicknames of Vixie cron that name a time (`@reboot` has no meaning here), as 5-field
 * expressions. cron-parser knows a few more (`@minutely`, `@weekdays` …) that no other cron does:
 * they are refused, so a schedule means the same thing in any crontab.
 */
const NICKNAMES: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

/** A schedule, with its time zone (null: UTC). */
export interface Schedule {
  schedule: string;
  schedule_tz: string | null;
}

/** Why a time zone name is not one Intl (and so luxon, which cron-parser uses) knows, or null. */
function timeZoneProblem(tz: string): string | null {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return null;
  } catch {
    return `body.schedule_tz: ${JSON.stringify(tz)} is not a known IANA time zone (for example Europe/Paris or UTC)`;
  }
}

/** The expression cron-parser is given: a nickname's expansion, else the schedule itself. */
function expressionOf(schedule: string): string {
  return NICKNAMES[schedule.trim()] ?? schedule;
}

function parse(schedule: Schedule, currentMs: number) {
  return CronExpressionParser.parse(expressionOf(schedule.schedule), {
    currentDate: new Date(currentMs),
    tz: schedule.schedule_tz ?? 'UTC',
  });
}

/**
 * What is wrong with a schedule and its time zone, as a 400's message, or null when it is good.
 * cron-parser alone is too lenient for a stored schedule: it fills in missing fields (so `* *`
 * would pass) and draws `H` fields at random on every parse (so the next tick would move).
 */
export function scheduleProblem(schedule: string, tz: string | null): string | null {
  if (schedule.length > MAX_SCHEDULE_LENGTH) return `body.schedule is longer than ${MAX_SCHEDULE_LENGTH} characters`;
  const trimmed = schedule.trim();
  if (trimmed.startsWith('@')) {
    if (NICKNAMES[trimmed] === undefined)
      return `body.schedule: unknown nickname ${JSON.stringify(trimmed.slice(0, 40))}: use ${Object.keys(NICKNAMES).join(', ')} or a cron expression`;
  } else {
    const fields = trimmed === '' ? [] : trimmed.split(/\s+/);
    if (fields.length !== 5 && fields.length !== 6)
      return `body.schedule must have 5 fields (minute hour day-of-month month day-of-week) or 6 (a leading seconds field), not ${fields.length}`;
    if (fields.some((field) => /(^|,)H/i.test(field))) return 'body.schedule: H (hashed) values are not supported';
  }
  if (tz !== null) {
    const problem = timeZoneProblem(tz);
    if (problem !== null) return problem;
  }
  try {
    parse({ schedule, schedule_tz: tz }, Date.now()).next();
  } catch (error) {
    return `body.schedule is not a valid cron expression: ${(error as Error).message}`;
  }
  return null;
}

/** The first tick of the schedule strictly after `afterMs` (epoch ms). */
export function nextTick(schedule: Schedule, afterMs: number): number {
  return parse(schedule, afterMs).next().toDate().getTime();
}

/** The latest tick of the schedule at or before `atMs` (epoch ms). */
export function latestTick(schedule: Schedule, atMs: number): number {
  // prev() is strictly before its current date: one millisecond later keeps a tick at atMs itself.
  return parse(schedule, atMs + 1)
    .prev()
    .toDate()
    .getTime();
}

/** Clock and timing of the ticker; tests inject a clock and a short poll. */
export interface CronOptions {
  /** The time in epoch ms (default Date.now): the ticks due are those at or before it. */
  now?: () => number;
  /** Longest wait between two reads of what is due, in ms (default 1,000). */
  pollMs?: number;
  /** Due schedules claimed per read (default 100; a full batch reads again at once). */
  batch?: number;
}

export interface CronTickerDeps {
  repository: LambdaRepository;
  /** Runs one tick of a lambda (Invoker.runCron): limited, listed, recorded like any run. */
  run: (lambda: Lambda, trigger: CronTrigger) => Promise<unknown>;
  /** Warnings: never the code, env, secrets or output of a lambda. */
  warn: (context: Record<string, unknown>, message: string) => void;
  /**
   * Other instances' changes of lambdas (the repository's notifier topic): each one wakes the
   * ticker, so a schedule set elsewhere is read at once rather than at the next poll.
   */
  feed?: Pick<Notifier, 'subscribe'>;
}

/**
 * Runs every lambda's schedule on every instance, each tick exactly once across them (README:
 * Cron schedules). The claim of a tick is the row's `next_run_ms`: an instance reads the due rows
 * and moves each one's `next_run_ms` from the value it read to the next tick; only the instance
 * whose compare-and-set changed the row runs the tick. After downtime the tick run is the latest
 * one due, never every missed one.
 */
export class CronTicker {
  private readonly now: () => number;
  private readonly pollMs: number;
  private readonly batch: number;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  /** The pass in progress, if any: close() waits for it. */
  private passing: Promise<void> | null = null;
  /** Runs started and not yet ended: close() waits for them, so their records are kept. */
  private readonly running = new Set<Promise<unknown>>();
  /** A wake arrived during a pass: the next pass follows at once. */
  private again = false;
  private unsubscribe: (() => void) | null = null;

  constructor(
    private readonly deps: CronTickerDeps,
    options: CronOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    this.pollMs = options.pollMs ?? 1000;
    this.batch = options.batch ?? 100;
  }

  start(): void {
    this.unsubscribe = this.deps.feed?.subscribe(LAMBDA_CHANGED_TOPIC, () => this.wake()) ?? null;
    this.arm(0);
  }

  /** Reads what is due now instead of at the next poll: a schedule was set or changed. */
  wake(): void {
    if (this.passing) this.again = true;
    else this.arm(0);
  }

  /** Stops ticking; waits for the pass in progress and the runs it started. */
  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe?.();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.passing;
    await Promise.allSettled([...this.running]);
  }

  private arm(delayMs: number): void {
    if (this.closed) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.passing = this.pass().finally(() => (this.passing = null));
    }, delayMs);
    // A pending tick never keeps the process alive by itself.
    this.timer.unref();
  }

  /** Claims and starts what is due, then sleeps until the earliest next tick (at most pollMs). */
  private async pass(): Promise<void> {
    let delay = this.pollMs;
    try {
      const now = this.now();
      const due = await this.deps.repository.dueSchedules(now, this.batch);
      for (const row of due) {
        if (this.closed) return;
        await this.claimAndRun(row, now);
      }
      if (due.length === this.batch) delay = 0;
      else {
        const earliest = await this.deps.repository.earliestRun();
        if (earliest !== null) delay = Math.min(this.pollMs, Math.max(0, earliest - this.now()));
      }
    } catch (err) {
      this.deps.warn({ err }, 'could not read the due lambda schedules');
    } finally {
      this.arm(this.again ? 0 : delay);
      this.again = false;
    }
  }

  private async claimAndRun(row: Schedule & { id: string; next_run_ms: number }, now: number): Promise<void> {
    let scheduled: number;
    let next: number | null;
    try {
      scheduled = latestTick(row, now);
      next = nextTick(row, now);
    } catch (err) {
      // A stored schedule that no longer computes (say, a time zone gone from the system): it
      // stops ticking rather than being read again on every pass.
      this.deps.warn({ err, lambda_id: row.id }, 'the schedule of a lambda cannot be computed; it is stopped');
      scheduled = Number.NaN;
      next = null;
    }
    const claimed = await this.deps.repository.claimTick(row, next);
    if (!claimed || next === null) return;
    const lambda = await this.deps.repository.get(row.id);
    // Gone, or made static, since it was read: nothing to run.
    if (!lambda || lambda.language !== 'javascript') return;
    const trigger: CronTrigger = { type: 'cron', scheduled_at: rfc3339(new Date(scheduled)) };
    const run = this.deps
      .run(lambda, trigger)
      .catch((err: unknown) =>
        this.deps.warn(
          { lambda_id: lambda.id, scheduled_at: trigger.scheduled_at, code: (err as { code?: unknown }).code },
          'a cron tick of a lambda did not run',
        ),
      );
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
  }
}
