import { HttpError } from '../../core/errors.ts';
import type { LambdaErrorCode } from './runtime/sandbox.ts';

/**
 * Every coded error the lambda service answers itself, with its status, code and message:
 * handlers and the code under them throw these rather than building errors inline, so this table
 * is the whole list. The shared service app adds the platform's generic answers besides: a body,
 * query or path that fails its schema (400 `validation_error`), unparsable JSON (400
 * `invalid_json`), an oversized body (413 `payload_too_large`), an unknown path (404 `not_found`)
 * or method (405 `method_not_allowed`); `requireIdentity` answers 401 `unauthorized` without an
 * identity.
 */
export const LambdaErrors = {
  // 400: lambda definitions (README: Create / patch).
  runtimeInvalid: () => new HttpError(400, 'validation_error', 'body.runtime must be js or javascript'),
  runtimeDisagrees: () => new HttpError(400, 'validation_error', 'body.runtime disagrees with body.language'),
  codeDoesNotParse: (problem: string) => new HttpError(400, 'validation_error', `body.code does not parse: ${problem}`),

  // 400: env and secrets (README: Environment and secrets). Messages name a secret, never its value.
  envNameInvalid: (field: 'env' | 'secrets', name: string) =>
    new HttpError(
      400,
      'validation_error',
      `body.${field}: ${JSON.stringify(name.length > 140 ? `${name.slice(0, 140)}…` : name)} is not a valid name (letters, digits and _, not starting with a digit, at most 128 characters)`,
    ),
  envValueTooLong: (field: 'env' | 'secrets', name: string, max: number) =>
    new HttpError(400, 'validation_error', `body.${field}.${name} is longer than ${max} characters`),
  envTooManyNames: (count: number, max: number) =>
    new HttpError(
      400,
      'validation_error',
      `env and secrets may hold at most ${max} names together; this would make ${count}`,
    ),
  envTooLarge: (total: number, max: number) =>
    new HttpError(
      400,
      'validation_error',
      `env and secrets may hold at most ${max} characters of names and values together; this would make ${total}`,
    ),
  envNameInBoth: (name: string) =>
    new HttpError(400, 'validation_error', `${name} would be both in env and in secrets: a name may be in only one`),
  // 400: cron schedules (README: Cron schedules); `problem` says what is wrong (cron.ts).
  scheduleInvalid: (problem: string) => new HttpError(400, 'validation_error', problem),
  scheduleOnStatic: (language: string) =>
    new HttpError(
      400,
      'validation_error',
      `body.schedule: a ${language} lambda runs no code and cannot have a schedule`,
    ),
  scheduleTzWithoutSchedule: () =>
    new HttpError(400, 'validation_error', 'body.schedule_tz needs a schedule: set body.schedule as well'),
  loggerNotOwned: (id: string) =>
    new HttpError(400, 'validation_error', `body.logger_id: no logger ${id} that you own`),

  // 400, 413: bodies of the project mux, which the service reads itself (README: Invocation).
  bodyTooDeep: (maxNesting: number) =>
    new HttpError(400, 'validation_error', `request body is nested more than ${maxNesting} levels deep`),
  invalidJson: (reason: string) => new HttpError(400, 'invalid_json', `request body is not valid JSON: ${reason}`),
  bodyTooLarge: () => new HttpError(413, 'payload_too_large', 'request body is too large'),

  // 403: on a project host, changes need an owner of the project.
  notProjectOwner: () => new HttpError(403, 'forbidden', 'only owners of this project can manage its lambdas'),

  // 404: another owner's lambda, or one of another project on a project host, is not found.
  lambdaNotFound: (id: string) => new HttpError(404, 'not_found', `no lambda ${id}`),
  noRoute: (method: string, path: string) => new HttpError(404, 'not_found', `no lambda for ${method} ${path}`),

  // 409
  nameTaken: (name: string | undefined) =>
    new HttpError(409, 'conflict', `a lambda named ${JSON.stringify(name)} already exists`),

  // 429 (README: Fairness)
  ownerBusy: (perOwner: number, maxWaiting: number) =>
    new HttpError(
      429,
      'too_many_requests',
      `the lambdas of this owner already run ${perOwner} at once and ${maxWaiting} more wait (LAMBDA_OWNER_CONCURRENCY); retry later`,
      { 'retry-after': '1' },
    ),

  /**
   * 500: the run failed; `code` is the runtime's: `lambda_error` (a throw, or output the host
   * refuses), `lambda_timeout`, `lambda_memory` or `lambda_response_too_large` (README: Invocation,
   * Output rules, Runtime).
   */
  lambdaFailed: (code: LambdaErrorCode, message: string) => new HttpError(500, code, message),

  /**
   * 500: the stored secrets of a lambda cannot be opened, to change them: sealed under another key
   * (every instance needs the same LAMBDA_SECRETS_KEY), or damaged (README: Environment and
   * secrets). The message is the one of SecretsKeyMismatch or SecretsUnreadable (secrets.ts).
   */
  secretsUnreadable: (message: string) => new HttpError(500, 'secrets_unreadable', message),

  // 503: the logs service could not answer whether the owner has the logger (README: Create / patch).
  logsUnreachable: () =>
    new HttpError(503, 'service_unavailable', 'the logs service cannot be reached to check body.logger_id'),
} as const;
