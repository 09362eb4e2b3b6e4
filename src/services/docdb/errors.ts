import { HttpError } from '../../core/errors.ts';

/**
 * Every coded error docdb answers itself, with its status, code and message: handlers, the
 * repository and the engine throw (or report, inside a stream) these rather than building errors
 * inline, so this table is the whole list. The shared service app adds the platform's generic
 * answers besides, on the routes whose body it parses (all but the collection actions): a body
 * that fails the route schema (400 `validation_error`), unparsable JSON (400 `invalid_json`), an
 * oversized body (413 `payload_too_large`); and on every route an unknown path (404 `not_found`) or
 * method (405 `method_not_allowed`). The identity check (`core/identity.ts`) answers 401
 * `unauthorized` for a missing or unusable gateway identity.
 */
export const DocdbErrors = {
  // 400 `invalid_json`: an empty body where one is required, or malformed JSON (README: Requests).
  malformedJson: () => new HttpError(400, 'invalid_json', 'Malformed JSON'),
  /** A malformed value inside a streamed insert body; the message says where it broke. */
  malformedValue: (message: string) => new HttpError(400, 'invalid_json', message),

  // 400 `validation_error`: bodies and fields.
  /** A database route body that fails its schema (checked by hand for the colon actions). */
  bodyInvalid: (path: string, problem: string) => new HttpError(400, 'validation_error', `body${path} ${problem}`),
  bodyTooDeep: (levels: number) =>
    new HttpError(400, 'validation_error', `body nested more than ${levels} levels deep`),
  notAnObject: (what: string) => new HttpError(400, 'validation_error', `${what} must be a JSON object`),
  fieldRequired: (field: string) => new HttpError(400, 'validation_error', `'${field}' is required`),
  /** `kind` with its article: `a string`, `an integer`, `an array of strings`, … */
  fieldType: (field: string, kind: string) => new HttpError(400, 'validation_error', `'${field}' must be ${kind}`),
  fieldEmpty: (field: string) => new HttpError(400, 'validation_error', `'${field}' must not be empty`),
  /** PostgreSQL text cannot hold NUL, so no stored string may contain it (on either database). */
  fieldHasNul: (field: string) =>
    new HttpError(400, 'validation_error', `body.${field} must not contain NUL characters`),
  ownerRemovesSelf: () => new HttpError(400, 'validation_error', 'owners cannot remove themselves'),
  lastOwner: () => new HttpError(400, 'validation_error', 'a database must keep at least one owner'),
  collectionNameTooLong: (max: number) =>
    new HttpError(400, 'validation_error', `collection name longer than ${max} characters`),
  collectionNameCharacters: () =>
    new HttpError(400, 'validation_error', 'collection name must not contain / or control characters'),
  collectionNameDots: () => new HttpError(400, 'validation_error', "collection name must not be '.' or '..'"),
  defaultsTooDeep: (levels: number) =>
    new HttpError(400, 'validation_error', `defaults nested more than ${levels} levels deep`),
  documentIdRequired: () => new HttpError(400, 'validation_error', 'document id is required'),
  documentNotObject: () => new HttpError(400, 'validation_error', 'document must be a JSON object'),
  documentTooDeep: (levels: number) =>
    new HttpError(400, 'validation_error', `document nested more than ${levels} levels deep`),
  /** `type` as sent: a string as it is, anything else as JSON. */
  indexTypeInvalid: (type: string) =>
    new HttpError(400, 'validation_error', `unexpected type '${type}' instead of [map|btree]`),
  mapIndexNeedsField: () => new HttpError(400, 'validation_error', "map indexes need a non-empty 'field'"),
  btreeIndexNeedsFields: () => new HttpError(400, 'validation_error', "btree indexes need 'fields' (or 'field')"),
  indexFieldNameEmpty: () => new HttpError(400, 'validation_error', 'index field names must not be empty'),

  // 400 `invalid_filter`: before any document is read, or when one document takes a worker too long.
  invalidFilter: (message: string) => new HttpError(400, 'invalid_filter', message),
  filterTooSlow: (seconds: number) =>
    new HttpError(
      400,
      'invalid_filter',
      `the filter took longer than ${seconds} s on one document; simplify it or select fewer documents with an index`,
    ),

  // 401 and 403: the access procedure (README: Access).
  badApiKey: () => new HttpError(401, 'unauthorized', 'unknown API key or wrong secret'),
  keyOfAnotherDatabase: () => new HttpError(403, 'forbidden', 'this API key belongs to another database'),
  notOwner: () => new HttpError(403, 'forbidden', 'not an owner of this database'),

  // 404
  databaseNotFound: () => new HttpError(404, 'not_found', 'database not found'),
  /** The message never repeats the submitted key: it might be a secret pasted by mistake. */
  apiKeyNotFound: () => new HttpError(404, 'not_found', 'API key not found in this database'),
  ownerNotFound: (owner: string) =>
    new HttpError(404, 'not_found', `user ${JSON.stringify(owner)} is not an owner of this database`),
  collectionNotFound: () => new HttpError(404, 'not_found', 'collection not found'),
  indexNotFound: (index: string, collection: string) =>
    new HttpError(404, 'not_found', `index '${index}' not found in collection '${collection}'`),
  documentNotFound: (id: string) => new HttpError(404, 'not_found', `document '${id}' not found`),

  // 405: a known resource or action with the wrong method; `allow` lists the right ones.
  methodNotAllowed: (method: string, path: string, allow: string) =>
    new HttpError(405, 'method_not_allowed', `method ${method} is not allowed on ${path}`, { allow }),
  actionNeedsPost: (action: string) =>
    new HttpError(405, 'method_not_allowed', `use POST for :${action}`, { allow: 'POST' }),
  collectionNeedsAction: () =>
    new HttpError(405, 'method_not_allowed', 'collections accept GET; actions are POST {collection}:{action}', {
      allow: 'GET',
    }),

  // 409
  collectionExists: () => new HttpError(409, 'conflict', 'collection already exists'),
  indexExists: (index: string) => new HttpError(409, 'conflict', `index '${index}' already exists`),
  /** A document an index refuses on insert or patch (a line of its own once the stream has begun). */
  indexRejectsDocument: (index: string, reason: string) =>
    new HttpError(409, 'conflict', `index add '${index}': ${reason}`),
  /** `:createIndex` over a stored document the new index refuses; nothing is created. */
  indexBuildFails: (reason: string, document: string) =>
    new HttpError(409, 'conflict', `index row: ${reason}, data: ${document}`),

  // 413
  bodyTooLarge: (limit: number) => new HttpError(413, 'payload_too_large', `body exceeds ${limit} bytes`),
  documentTooLarge: (limit: number) => new HttpError(413, 'payload_too_large', `document exceeds ${limit} bytes`),
  /** A streamed insert value over the per-document limit; the message comes from the splitter. */
  valueTooLarge: (message: string) => new HttpError(413, 'payload_too_large', message),

  // 500: never a stack trace; the cause is logged.
  internal: () => new HttpError(500, 'internal_error', 'internal error'),
} as const;
