import { HttpError } from '../../core/errors.ts';

/**
 * Every coded error the auth service answers itself, with its status, code and message: handlers
 * and the code under them throw these rather than building errors inline, so this table is the
 * whole list. The shared service app adds the platform's generic answers besides: a body, query or
 * path that fails its schema (400 `validation_error`), unparsable JSON (400 `invalid_json`), an
 * oversized body (413 `payload_too_large`), an unknown path (404 `not_found`) or method (405
 * `method_not_allowed`); `requireIdentity` answers 401 `unauthorized` without an identity.
 */
export const AuthErrors = {
  // 400: input the schemas cannot judge. Messages name the rule, never the value of a password.
  emailEmpty: (field: string) => new HttpError(400, 'validation_error', `${field} must not be empty`),
  emailTooLong: (field: string, max: number) =>
    new HttpError(400, 'validation_error', `${field} must have at most ${max} characters`),
  emailInvalid: (field: string) =>
    new HttpError(400, 'validation_error', `${field} must be an email address such as name@example.com`),
  passwordLength: (field: string, min: number, max: number) =>
    new HttpError(400, 'validation_error', `${field} must have ${min}–${max} characters`),
  sessionTokenBodyInvalid: () =>
    new HttpError(
      400,
      'validation_error',
      'the body must be empty or {"code": "<sign-in code>", "code_verifier": "<verifier>"}',
    ),
  codeVerifierInvalid: () =>
    new HttpError(
      400,
      'validation_error',
      'code_verifier must be 43–128 characters of A–Z, a–z, 0–9, "-", ".", "_" and "~"',
    ),
  /** A single sign-on `redirect` outside the console's origin and the allow-list (README: The hand-over code). */
  redirectNotAllowed: (consoleOrigin: string, allowed: readonly string[]) =>
    new HttpError(
      400,
      'validation_error',
      `redirect must be a path on the console or a URL on the console's origin (${consoleOrigin})` +
        (allowed.length > 0 ? ` or on one of ${allowed.join(', ')}` : '') +
        '; other origins can be allowed with the SSO_REDIRECT_ORIGINS setting',
    ),
  challengeMethodWithoutChallenge: () =>
    new HttpError(400, 'validation_error', 'code_challenge_method needs a code_challenge'),
  callbackWithoutCode: () => new HttpError(400, 'validation_error', 'querystring must have code or error'),
  invalidState: () =>
    new HttpError(400, 'invalid_state', 'unknown, used or expired sign-in state; start the sign-in again'),

  // 401
  /** One message for an unknown email, a wrong password and a user without a password (README: Login failures). */
  invalidCredentials: () => new HttpError(401, 'unauthorized', 'invalid email or password'),
  authenticationRequired: () => new HttpError(401, 'unauthorized', 'authentication required'),
  /** A credential whose user no longer exists identifies nobody: the caller must log in again. */
  userGone: () => new HttpError(401, 'unauthorized', 'the authenticated user no longer exists'),
  sessionEnded: () => new HttpError(401, 'unauthorized', 'the session has ended; sign in again'),
  ssoCodeUnknown: () => new HttpError(401, 'unauthorized', 'unknown, used or expired sign-in code; sign in again'),
  /** A hand-over code presented without the verifier of its challenge (the code is burned by then). */
  ssoCodeUnbound: () =>
    new HttpError(
      401,
      'unauthorized',
      'the sign-in code belongs to the page that started the sign-in and its code_verifier did not come with it; the code is now used up, sign in again',
    ),
  /** The provider sent the browser back with an OAuth `error`; only a code that looks like one is repeated. */
  providerDeclined: (error: string) =>
    new HttpError(
      401,
      'unauthorized',
      `the identity provider did not sign you in${/^[\w.-]{1,64}$/.test(error) ? ` (${error})` : ''}`,
    ),
  issuerMismatch: () => new HttpError(401, 'unauthorized', 'the authorization response comes from another issuer'),
  idTokenRejected: (reason: string) => new HttpError(401, 'invalid_token', `ID token rejected: ${reason}`),

  // 403
  signupClosed: () => new HttpError(403, 'forbidden', 'signup is closed; ask an administrator for an account'),
  sessionRequired: () =>
    new HttpError(
      403,
      'forbidden',
      'a signed-in session (cookie or bearer session token) is required; API keys and provider tokens cannot start sessions',
    ),
  /** No user may be used or created for a verified identity; `reason` says why (README: Single sign-on). */
  noAccount: (reason: string) => new HttpError(403, 'forbidden', reason),

  // 404
  unknownProvider: (name: string) =>
    new HttpError(404, 'not_found', `unknown single sign-on provider '${name.slice(0, 100)}'`),

  // 409
  emailTaken: (email: string) => new HttpError(409, 'conflict', `a user with email ${email} already exists`),
  /** A subject is one person: a (provider, subject) pair links to one user only. */
  identityLinkedElsewhere: (provider: string) =>
    new HttpError(409, 'conflict', `this ${provider} account is already linked to another user`),

  // 429
  tooManyLogins: (seconds: number) =>
    new HttpError(429, 'too_many_requests', `too many failed logins for this email; try again in ${seconds} s`, {
      'retry-after': String(seconds),
    }),

  // 502
  providerFailed: (reason: string) => new HttpError(502, 'provider_error', reason),
} as const;
