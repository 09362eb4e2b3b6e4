// What the lambda editor sends: a PATCH with only what changed, env and secrets as merge patches
// (a named value is set, null deletes the name; src/services/lambda/README.md, Environment and
// secrets), the cron schedule and its zone as the platform's PATCH reads them (Cron schedules). Pure functions on the editor's rows, without the DOM, so they are tested on their own.
import type { Lambda, LambdaChange } from '@stratus/client';

/** One editable env variable of the form; `key` only keeps rows apart while they are edited. */
export interface EnvRow {
  key: number;
  name: string;
  value: string;
}

/**
 * A secret of the form. A stored one shows its name only: it is kept, gets a new value typed by
 * the owner (`replace`), or is removed. A new one has a name and a value typed by the owner. Values
 * live only here, in the form, until the save that sends them.
 */
export type SecretRow =
  | { key: number; stored: true; name: string; action: 'keep' | 'replace' | 'remove'; value: string }
  | { key: number; stored: false; name: string; value: string };

/** The fields of the lambda form, as text. */
export interface LambdaFields {
  name: string;
  language: string;
  method: string;
  path: string;
  code: string;
}

/** Everything the editor holds, and the lambda it was made from (what a save compares with). */
export interface LambdaDraft extends LambdaFields {
  base: Lambda;
  env: EnvRow[];
  secrets: SecretRow[];
  /** A logger id, or '' for none. */
  logger: string;
  /** The cron expression, or '' for no schedule. */
  schedule: string;
  /** The schedule's IANA time zone, or '' for UTC. */
  scheduleTz: string;
}

/** A mistake in the form found before anything is sent. */
export class DraftError extends Error {
  override readonly name = 'DraftError';
}

let nextKey = 0;
/** A key for a new row of the form. */
export function rowKey(): number {
  return ++nextKey;
}

/** The editor's state for a lambda as the platform answered it: env shown, secrets by name only. */
export function draftOf(lambda: Lambda): LambdaDraft {
  return {
    base: lambda,
    name: lambda.name,
    language: lambda.language,
    method: lambda.method,
    path: lambda.path,
    code: lambda.code,
    env: Object.entries(lambda.env).map(([name, value]) => ({ key: rowKey(), name, value })),
    secrets: lambda.secrets.map((name) => ({ key: rowKey(), stored: true, name, action: 'keep', value: '' })),
    logger: lambda.logger_id ?? '',
    schedule: lambda.schedule ?? '',
    scheduleTz: lambda.schedule_tz ?? '',
  };
}

/** The env merge patch from `stored` to the rows: changed and new names with values, removed ones null. */
export function envChange(
  stored: Readonly<Record<string, string>>,
  rows: readonly EnvRow[],
): Record<string, string | null> | undefined {
  const wanted = new Map<string, string>();
  for (const row of rows) {
    const name = row.name.trim();
    if (name === '' && row.value === '') continue;
    if (name === '') throw new DraftError('Give every environment variable a name, or remove its row.');
    if (wanted.has(name)) throw new DraftError(`The environment variable ${name} is listed twice.`);
    wanted.set(name, row.value);
  }
  const change: Record<string, string | null> = {};
  for (const name of Object.keys(stored)) if (!wanted.has(name)) change[name] = null;
  for (const [name, value] of wanted) if (!Object.hasOwn(stored, name) || stored[name] !== value) change[name] = value;
  return Object.keys(change).length > 0 ? change : undefined;
}

/** The secrets merge patch: new values for added and replaced secrets, null for removed ones. */
export function secretsChange(rows: readonly SecretRow[]): Record<string, string | null> | undefined {
  const change: Record<string, string | null> = {};
  const named = new Set<string>();
  for (const row of rows) {
    if (row.stored) {
      if (row.action === 'keep') continue;
      if (row.action === 'remove') change[row.name] = null;
      else if (row.value === '')
        throw new DraftError(`Type the new value of the secret ${row.name}, or cancel its replacement.`);
      else change[row.name] = row.value;
      named.add(row.name);
      continue;
    }
    const name = row.name.trim();
    if (name === '' && row.value === '') continue;
    if (name === '') throw new DraftError('Give every new secret a name, or remove its row.');
    if (row.value === '') throw new DraftError(`Type a value for the secret ${name}.`);
    if (named.has(name)) throw new DraftError(`The secret ${name} is listed twice.`);
    named.add(name);
    change[name] = row.value;
  }
  return Object.keys(change).length > 0 ? change : undefined;
}

/**
 * The schedule fields of the PATCH, or undefined when neither changed. The expression itself is
 * checked by the platform (its 400 message is shown); only what it cannot tell apart is caught here.
 */
export function scheduleChange(
  stored: Pick<Lambda, 'schedule' | 'schedule_tz'>,
  schedule: string,
  scheduleTz: string,
): Pick<LambdaChange, 'schedule' | 'schedule_tz'> | undefined {
  const expression = schedule.trim();
  const zone = scheduleTz.trim();
  if (expression === '') {
    // An emptied expression removes the schedule, and the platform drops its zone with it.
    if (stored.schedule !== null) return { schedule: null };
    if (zone !== '') throw new DraftError('A time zone needs a schedule: type a cron expression, or empty the zone.');
    return undefined;
  }
  const change: Pick<LambdaChange, 'schedule' | 'schedule_tz'> = {};
  if (expression !== stored.schedule) change.schedule = expression;
  // Left out, the platform keeps the stored zone; so it is sent only when it differs.
  if (zone !== (stored.schedule_tz ?? '')) change.schedule_tz = zone === '' ? null : zone;
  return Object.keys(change).length > 0 ? change : undefined;
}

const LANGUAGES = ['javascript', 'static-html', 'static-css', 'static-js'] as const;

/**
 * The PATCH body for what the draft changes of its lambda, or null when it changes nothing. An
 * empty path means no change (the platform keeps a path; it is given only on create).
 */
export function lambdaChange(draft: LambdaDraft): LambdaChange | null {
  const base = draft.base;
  const change: LambdaChange = {};
  if (draft.name !== base.name) change.name = draft.name;
  if (draft.language !== base.language) change.language = LANGUAGES.find((l) => l === draft.language);
  if (draft.method !== base.method) change.method = draft.method;
  const path = draft.path.trim();
  if (path !== '' && path !== base.path) change.path = path;
  if (draft.code !== base.code) change.code = draft.code;
  const env = envChange(base.env, draft.env);
  if (env) change.env = env;
  const secrets = secretsChange(draft.secrets);
  if (secrets) change.secrets = secrets;
  if (draft.logger !== (base.logger_id ?? '')) change.logger_id = draft.logger === '' ? null : draft.logger;
  const schedule = scheduleChange(base, draft.schedule, draft.scheduleTz);
  if (schedule) Object.assign(change, schedule);
  return Object.keys(change).length > 0 ? change : null;
}
