import { HttpError } from '../../core/errors.ts';

/**
 * Every coded error the apikeys service answers itself, with its status, code and message:
 * handlers throw these rather than building errors inline, so this table is the whole list. The
 * shared service app adds the platform's generic answers besides: a body, query or path that fails
 * its schema (400 `validation_error`), unparsable JSON (400 `invalid_json`), an oversized body (413
 * `payload_too_large`), an unknown path (404 `not_found`) or method (405 `method_not_allowed`);
 * `requireIdentity` answers 401 `unauthorized` without an identity.
 */
export const ApikeysErrors = {
  // 403: callers authenticated by an API key may manage keys and projects only with an unscoped key (README).
  managingKeyUnknown: () =>
    new HttpError(
      403,
      'forbidden',
      'the API key this request was authenticated with is unknown or revoked; it cannot manage API keys or projects',
    ),
  managingKeyScoped: () =>
    new HttpError(
      403,
      'forbidden',
      'an API key with scopes cannot create, change or delete API keys or projects; use an unscoped key or a session',
    ),

  // 404: another user's key or project is not found, never forbidden.
  keyNotFound: (key: string) => new HttpError(404, 'not_found', `API key ${key} not found`),
  projectNotFound: (id: string) => new HttpError(404, 'not_found', `project ${id} not found`),

  // 409: slugs (README: Slugs).
  slugReserved: (slug: string) => new HttpError(409, 'conflict', `slug '${slug}' is reserved for the platform`),
  slugTaken: (slug: string) => new HttpError(409, 'conflict', `slug '${slug}' is already taken`),
  noFreeSlug: (name: string) =>
    new HttpError(409, 'conflict', `no free slug found for '${name}'; pass a slug explicitly`),
} as const;
