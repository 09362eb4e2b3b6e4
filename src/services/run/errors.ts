import { HttpError } from '../../core/errors.ts';

/**
 * Every coded error the run service's console API and health routes answer, with its status and
 * message (the README's decisions give the rules behind them); handlers throw these rather than
 * building errors inline, so this table is the whole list. The registry under `/v2/` answers in
 * the OCI form instead, from its own table (`registry/errors.ts`). The shared service app adds the
 * platform's generic answers besides: a body, query or path that fails its schema (400
 * `validation_error`), unparsable JSON (400 `invalid_json`), an oversized body (413
 * `payload_too_large`), an unknown path (404 `not_found`); and the identity check its 401
 * `unauthorized`.
 */
export const RunErrors = {
  // 400: input the schemas cannot judge.
  invalidRepositoryName: (name: string) =>
    new HttpError(400, 'validation_error', `invalid repository name '${name.slice(0, 300)}'`),
  /** start and rollback name their target by exactly one of `reference` and `digest`. */
  targetNotOne: () => new HttpError(400, 'validation_error', 'give exactly one of reference or digest'),
  invalidTag: (tag: string) => new HttpError(400, 'validation_error', `invalid tag '${tag.slice(0, 200)}'`),
  /** `problem` is what `digestProblem` (names.ts) says is wrong with the digest. */
  invalidDigest: (problem: string) => new HttpError(400, 'validation_error', problem),
  envKeyInvalid: (index: number, key: string) =>
    new HttpError(
      400,
      'validation_error',
      `body.env[${index}].key '${key.slice(0, 200)}' must match ^[A-Za-z_][A-Za-z0-9_]*$`,
    ),
  envKeyTwice: (index: number, key: string) =>
    new HttpError(400, 'validation_error', `body.env[${index}].key '${key}' appears twice`),
  volumeNameTwice: (index: number, name: string) =>
    new HttpError(400, 'validation_error', `body.volumes[${index}].name '${name}' appears twice`),
  volumeTargetNotAbsolute: (index: number, target: string) =>
    new HttpError(
      400,
      'validation_error',
      `body.volumes[${index}].target '${target.slice(0, 200)}' must be an absolute path`,
    ),
  loggerNotOwned: (loggerId: string) =>
    new HttpError(400, 'validation_error', `logger_id: no logger '${loggerId.slice(0, 200)}' of yours`),

  // 404: another user's repository answers exactly like a missing one.
  repositoryNotFound: (name: string) => new HttpError(404, 'not_found', `repository '${name}' not found`),
  referenceNotFound: (reference: string, repository: string) =>
    new HttpError(404, 'not_found', `reference '${reference}' not found in '${repository}'`),
  manifestNotFound: (digest: string, repository: string) =>
    new HttpError(404, 'not_found', `manifest ${digest} not found in '${repository}'`),

  // 502: the desired state was saved, the driver did not apply it.
  driverFailed: (driver: string, message: string) =>
    new HttpError(502, 'driver_error', `the change was saved but the ${driver} driver failed to apply it: ${message}`),

  // 503: the logs service, which checks a logger, does not answer.
  logsUnreachable: () => new HttpError(503, 'service_unavailable', 'the logs service is not reachable'),

  // 503 from /readyz.
  storageUnreachable: () => new HttpError(503, 'not_ready', 'storage is not reachable'),
  driverNotReady: (driver: string) => new HttpError(503, 'not_ready', `the ${driver} driver is not ready`),
} as const;
