import { HttpError } from '../../core/errors.ts';

/**
 * Every coded error the config service answers itself, with its status, code and message:
 * handlers throw these rather than building errors inline, so this table is the whole list. The
 * shared service app adds the platform's generic answers besides: a body, query or path that fails
 * its schema (400 `validation_error`), unparsable JSON (400 `invalid_json`), an oversized body (413
 * `payload_too_large`), an unknown path (404 `not_found`) or method (405 `method_not_allowed`);
 * `requireIdentity` answers 401 `unauthorized` on the v1 routes without an identity.
 */
export const ConfigErrors = {
  // 400
  bodyNotObject: () => new HttpError(400, 'validation_error', 'body must be a JSON object'),

  // 404: a path id outside the id character set names nothing, so it is not found rather than invalid (README).
  configNotFound: () => new HttpError(404, 'not_found', 'config not found'),

  // 409
  configExists: (id: string) => new HttpError(409, 'conflict', `config ${id} already exists`),
} as const;
