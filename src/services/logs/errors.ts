import { HttpError } from '../../core/errors.ts';

/**
 * Every coded error the logs service answers itself, with its status, code and message: handlers,
 * the access check, the pattern compiler and the events parser throw these rather than building
 * errors inline, so this table is the whole list (the README's errors table gives the cases). The
 * shared service app adds the platform's generic answers besides: a body, query or path that
 * fails its schema (400 `validation_error`), unparsable JSON (400 `invalid_json`), an oversized
 * body (413 `payload_too_large`), an unknown path (404 `not_found`) or method (405
 * `method_not_allowed`); and the identity check answers 401 `unauthorized` for an unusable
 * identity.
 */
export const LogsErrors = {
  // 400: events bodies, all or nothing; `where` names the NDJSON line or the logframe's byte offset.
  eventNotObject: (where: string) => new HttpError(400, 'validation_error', `${where}: an event must be a JSON object`),
  eventProjectIdInvalid: (where: string) =>
    new HttpError(400, 'validation_error', `${where}: project_id must be a non-empty string`),
  eventMessageNotString: (where: string) =>
    new HttpError(400, 'validation_error', `${where}: message must be a string`),
  eventNestedTooDeep: (where: string, maxNesting: number) =>
    new HttpError(400, 'validation_error', `${where}: nested more than ${maxNesting} levels deep`),
  eventMalformedJson: (where: string) => new HttpError(400, 'invalid_json', `${where}: malformed JSON`),
  eventsEncodingUnknown: () =>
    new HttpError(
      400,
      'validation_error',
      'body is neither NDJSON (starting with "{") nor logframe (starting with a digit)',
    ),
  frameHeaderExpected: (where: string) =>
    new HttpError(400, 'validation_error', `${where}: expected <meta length>:<message length>:`),
  frameTruncated: (where: string) => new HttpError(400, 'validation_error', `${where}: truncated frame`),
  frameNewlineMissing: (where: string) =>
    new HttpError(400, 'validation_error', `${where}: frame not followed by a newline`),
  frameMetadataNotObject: (where: string) =>
    new HttpError(400, 'validation_error', `${where}: metadata must be a JSON object`),

  // 400: stream patterns (the README's pattern caps); `named` is the pattern, quoted and shortened.
  regexTooLong: (named: string, maxLength: number) =>
    new HttpError(400, 'invalid_regex', `regex ${named} is longer than ${maxLength} characters`),
  regexInvalid: (named: string, reason: string) =>
    new HttpError(400, 'invalid_regex', `invalid regex ${named}: ${reason}`),
  regexTooComplex: (named: string, program: number, maxProgram: number) =>
    new HttpError(
      400,
      'invalid_regex',
      `regex ${named} is too complex: it compiles to ${program} RE2 instructions, at most ${maxProgram} are allowed (use smaller repetition counts)`,
    ),
  tooManyRegexes: (maxPatterns: number, count: number) =>
    new HttpError(
      400,
      'validation_error',
      `at most ${maxPatterns} regex parameters are allowed in one request (got ${count})`,
    ),
  regexesTooComplex: (total: number, maxTotal: number) =>
    new HttpError(
      400,
      'validation_error',
      `the regex parameters together compile to ${total} RE2 instructions; at most ${maxTotal} are allowed in one request`,
    ),

  // 400: owners; a logger keeps at least one.
  ownerSelfRemoval: () => new HttpError(400, 'validation_error', 'an owner cannot remove themselves'),
  lastOwner: () => new HttpError(400, 'validation_error', 'a logger keeps at least one owner'),

  // 401: a logger key pair that is missing, unknown or has the wrong secret.
  badKey: () => new HttpError(401, 'unauthorized', 'unknown API key or wrong secret'),

  // 403: valid credentials without access to this logger.
  keyOfAnotherLogger: () => new HttpError(403, 'forbidden', 'this API key belongs to another logger'),
  notAnOwner: () => new HttpError(403, 'forbidden', 'not an owner of this logger'),

  // 404
  loggerNotFound: () => new HttpError(404, 'not_found', 'logger not found'),
  keyNotFound: () => new HttpError(404, 'not_found', 'API key not found'),
  /** Removing a user who is not an owner. */
  ownerNotFound: () => new HttpError(404, 'not_found', 'not an owner of this logger'),

  /** An error a worker thread raised (one of the above, carried back as its parts). */
  fromWorker: (status: number, code: string, message: string) => new HttpError(status, code, message),
} as const;
