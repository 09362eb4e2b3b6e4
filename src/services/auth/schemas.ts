import { Type, type Static } from 'typebox';
import { EMAIL_MAX_LENGTH, PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from './credentials.ts';

/**
 * Request and response schemas. Every object is closed, so unknown fields are 400s on the way in
 * and a password hash can never reach a response on the way out.
 */
const closed = { additionalProperties: false } as const;

export const errorResponse = Type.Object(
  { error: Type.Object({ status: Type.Integer(), code: Type.String(), message: Type.String() }, closed) },
  { ...closed, description: 'Error envelope' },
);

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
    email: Type.String({ maxLength: 320, description: `An email address, at most ${EMAIL_MAX_LENGTH} characters once trimmed; stored lower-cased` }),
    password: Type.String({ minLength: PASSWORD_MIN_LENGTH, maxLength: PASSWORD_MAX_LENGTH, description: `${PASSWORD_MIN_LENGTH}–${PASSWORD_MAX_LENGTH} characters` }),
    nick: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Display name, 1–200 characters' })),
  },
  closed,
);
export type SignupBody = Static<typeof signupBody>;

export const userRecord = Type.Object(
  {
    id: Type.String({ description: 'user-<uuid v4>' }),
    email: Type.String(),
    nick: Type.Optional(Type.String()),
    picture: Type.Optional(Type.String()),
    created_at: Type.String({ format: 'date-time' }),
  },
  { ...closed, description: 'The user record; members the platform does not know are left out' },
);
