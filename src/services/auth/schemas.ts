import { Type, type Static } from 'typebox';
import { EMAIL_MAX_LENGTH, PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from './credentials.ts';
import { CODE_CHALLENGE_PATTERN, REDIRECT_MAX_LENGTH } from './handover.ts';
import { named } from '../../core/openapi.ts';

/**
 * Request and response schemas. Every object is closed, so unknown fields are 400s on the way in
 * and a password hash can never reach a response on the way out.
 */
const closed = { additionalProperties: false } as const;

export { closedErrorBody as errorResponse } from '../../core/schemas.ts';

export const loginBody = Type.Object(
  {
    email: Type.String({ maxLength: 320, description: 'Matched case-insensitively (trimmed, lower-cased)' }),
    // A longer password cannot be one this service accepted, and bcrypt would only read its start.
    password: Type.String({ maxLength: PASSWORD_MAX_LENGTH }),
  },
  closed,
);
export type LoginBody = Static<typeof loginBody>;

export const signupBody = Type.Object(
  {
    email: Type.String({
      maxLength: 320,
      description: `An email address, at most ${EMAIL_MAX_LENGTH} characters once trimmed; stored lower-cased`,
    }),
    password: Type.String({
      minLength: PASSWORD_MIN_LENGTH,
      maxLength: PASSWORD_MAX_LENGTH,
      description: `${PASSWORD_MIN_LENGTH}–${PASSWORD_MAX_LENGTH} characters`,
    }),
    nick: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Display name, 1–200 characters' })),
  },
  closed,
);
export type SignupBody = Static<typeof signupBody>;

export const userRecord = named(
  'User',
  Type.Object(
    {
      id: Type.String({ description: 'user-<uuid v4>' }),
      email: Type.String(),
      nick: Type.Optional(Type.String()),
      picture: Type.Optional(Type.String()),
      created_at: Type.String({ format: 'date-time' }),
    },
    { ...closed, description: 'The user record; members the platform does not know are left out' },
  ),
);

/** The shape login, signup and the SSO token exchange answer with (README: the routes table). */
export const loginResponseSchema = named(
  'LoginResponse',
  Type.Object(
    {
      user: Type.Object(
        {
          id: Type.String({ description: 'user-<uuid v4>' }),
          nick: Type.Optional(Type.String()),
          email: Type.String(),
        },
        { additionalProperties: false },
      ),
      token: Type.String({
        description: 'Session token: the stratus_session cookie value, also usable as Authorization: Bearer <token>',
      }),
    },
    { additionalProperties: false, description: 'The user and a new session token' },
  ),
);
export type LoginResponse = Static<typeof loginResponseSchema>;

/** Logout answers 204 without a body. */
export const noContent = Type.Null();

/** A new bearer session (`POST /v0/session/token`). */
export const sessionToken = named('SessionToken', Type.Object({ token: Type.String(), expires_at: Type.String() }));

// Single sign-on (README: Single sign-on).

export const providerParams = Type.Object(
  { provider: Type.String({ description: 'The configured provider name' }) },
  { additionalProperties: false },
);

export const ssoLoginQuery = Type.Object(
  {
    redirect: Type.Optional(
      Type.String({
        maxLength: REDIRECT_MAX_LENGTH,
        description:
          "Where the browser goes after signing in: a path (on the console) or a URL on the console's origin or on an origin listed in SSO_REDIRECT_ORIGINS. Default: the console.",
      }),
    ),
    code_challenge: Type.Optional(
      Type.String({
        pattern: CODE_CHALLENGE_PATTERN.source,
        description:
          'BASE64URL(SHA-256(code_verifier)) of a verifier the page keeps: the redirect then carries a one-time sso_code that only that verifier can trade at POST /v0/session/token. Without it no code is issued.',
      }),
    ),
    code_challenge_method: Type.Optional(Type.Literal('S256', { description: 'Only S256' })),
  },
  { additionalProperties: true },
);

export const ssoCallbackQuery = Type.Object(
  {
    code: Type.Optional(Type.String({ maxLength: 4096, description: 'Authorization code' })),
    state: Type.Optional(Type.String({ maxLength: 512, description: 'The state sent with the login redirect' })),
    error: Type.Optional(
      Type.String({ maxLength: 256, description: 'OAuth error from the provider (e.g. access_denied)' }),
    ),
    error_description: Type.Optional(Type.String({ maxLength: 4096 })),
    iss: Type.Optional(
      Type.String({
        maxLength: 2048,
        description: 'Issuer of the authorization response (RFC 9207); must be the provider when present',
      }),
    ),
  },
  // Providers add members of their own (session_state, scope, authuser…).
  { additionalProperties: true },
);

export const ssoTokenBody = Type.Object(
  {
    id_token: Type.String({
      minLength: 1,
      maxLength: 16384,
      description: 'An ID token issued by the provider to its configured client id',
    }),
  },
  { additionalProperties: false },
);

/** A 302 answer, described for the OpenAPI document. */
export const redirectResponse = (description: string) => Type.Null({ description });
