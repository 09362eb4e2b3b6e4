import { HttpError } from '../../core/errors.ts';

/**
 * Every coded error the scheduler answers itself, with its status, code and message: handlers
 * throw these rather than building errors inline, so this table is the whole list. The shared
 * service app adds the platform's generic answers besides: a body, query or path that fails its
 * schema (400 `validation_error`), unparsable JSON (400 `invalid_json`), an oversized body (413
 * `payload_too_large`), an unknown path (404 `not_found`) or method (405 `method_not_allowed`).
 */
export const SchedulerErrors = {
  // 400: input the schemas cannot judge.
  invalidDuration: (field: string, reason: string) => new HttpError(400, 'validation_error', `${field}: ${reason}`),
  invalidTime: (field: string) =>
    new HttpError(400, 'validation_error', `${field} must be an RFC 3339 time such as 2025-06-21T12:01:01Z`),
  delayAndFuture: () => new HttpError(400, 'validation_error', 'give either delay or future, not both'),
  noDueTime: () => new HttpError(400, 'validation_error', 'give delay or future'),
  dueTimeOutOfRange: () => new HttpError(400, 'validation_error', 'the due time is out of range (years 0001–9999)'),
  worktimeNotPositive: () => new HttpError(400, 'validation_error', 'worktime must be a positive duration'),
  worktimeTooLong: () => new HttpError(400, 'validation_error', 'worktime is at most 24h'),
  acknowledgeBodyInvalid: () => new HttpError(400, 'validation_error', 'the body may only be {"lease_id": string}'),
  leaseIdDiffers: () => new HttpError(400, 'validation_error', 'lease_id differs between the query and the body'),
  extensionNotPositive: () => new HttpError(400, 'invalid_lease', 'extension must be positive'),
  // Delivery targets and retry policy (README: Delivery). A message never quotes a webhook secret.
  targetNeedsUser: () =>
    new HttpError(
      400,
      'validation_error',
      'target.lambda_id: a lambda target needs the platform user whose lambda it runs: send a platform token (Authorization: Bearer) or session beside the scheduler key (X-API-Key)',
    ),
  targetLambdaNotRunnable: (id: string) =>
    new HttpError(400, 'validation_error', `target.lambda_id: no lambda ${JSON.stringify(id)} that you can run`),
  targetLambdaUnavailable: () =>
    new HttpError(
      400,
      'validation_error',
      'target.lambda_id: lambda delivery is unavailable here (the scheduler runs without the platform services)',
    ),
  targetLambdaCheckFailed: () =>
    new HttpError(503, 'service_unavailable', 'the lambda service cannot be reached to check target.lambda_id'),
  targetKind: () =>
    new HttpError(400, 'validation_error', 'target: give either lambda_id, or url and secret (a webhook)'),
  targetUrlInvalid: (reason: string) => new HttpError(400, 'validation_error', `target.url: ${reason}`),
  retryInvalid: (field: string, reason: string) => new HttpError(400, 'validation_error', `retry.${field}: ${reason}`),

  // 401: every method but GET needs a key.
  keyRequired: () =>
    new HttpError(401, 'unauthorized', 'a scheduler API key is required (X-API-Key or Authorization: Bearer)'),
  keyInvalid: () => new HttpError(401, 'unauthorized', 'invalid scheduler API key'),

  // 404: a path id outside the id character set names nothing, so it is not found rather than invalid.
  schedulerNotFound: (id: string) => new HttpError(404, 'not_found', `scheduler ${JSON.stringify(id)} not found`),
  taskNotFound: (id: string) => new HttpError(404, 'task_not_found', `task ${JSON.stringify(id)} not found`),

  // 409
  schedulerExists: (id: string) => new HttpError(409, 'conflict', `scheduler ${JSON.stringify(id)} already exists`),
  taskExists: (id: string) => new HttpError(409, 'task_already_exists', `task ${JSON.stringify(id)} already exists`),
  /** Retry of a dead task whose id is in use by a live task. */
  deadTaskIdInUse: (id: string) =>
    new HttpError(409, 'task_already_exists', `a task ${JSON.stringify(id)} already exists in the scheduler`),
  /** Extend of a task without a live lease; checked before the lease id. */
  taskNotInFlight: () => new HttpError(409, 'conflict', 'the task is not in flight (no live lease)'),
  /** Reschedule of a leased task. */
  taskInFlight: () => new HttpError(409, 'task_in_flight', 'task is currently leased'),
  leaseMismatch: () => new HttpError(409, 'lease_mismatch', 'lease_id is not the current lease of this task'),
} as const;
