import { Type } from 'typebox';
import { errorBody } from '../../core/schemas.ts';
import { named } from '../../core/openapi.ts';

/** Logger and key names (README: loggers, keys and owners; the decisions on names). */
export const MAX_NAME_LENGTH = 200;
export const MAX_OWNER_ID_LENGTH = 256;

export { errorBody };
/** The errors of every logger-scoped route: input, credentials, access, unknown logger. */
export const scopedErrors = { 400: errorBody, 401: errorBody, 403: errorBody, 404: errorBody };
/** The description of every logger-scoped route (README: access). */
export const scoped = 'Access: the identity of an owner, or Api-Key + Api-Secret of a key of this logger.';

export const name = Type.String({
  minLength: 1,
  maxLength: MAX_NAME_LENGTH,
  pattern: '^[^\\u0000]*$',
  description: `1–${MAX_NAME_LENGTH} characters`,
});
export const nameBody = Type.Object({ name });

/** A logger as the API returns it (README: loggers, keys and owners). */
export const loggerRecord = named(
  'Logger',
  Type.Object({
    id: Type.String({ description: 'UUID v4' }),
    name: Type.String(),
    owners: Type.Array(Type.String()),
    api_keys: Type.Array(Type.Object({ id: Type.String(), name: Type.String(), created_at: Type.String() })),
    usage: Type.Object({ bytes: Type.Integer(), lines: Type.Integer() }),
    created_at: Type.String(),
  }),
);

export const idParams = Type.Object({ id: Type.String() });
export const keyParams = Type.Object({ id: Type.String(), apiKey: Type.String() });
export const ownerParams = Type.Object({ id: Type.String(), ownerId: Type.String() });

/** README: stats. */
export const loggerStats = named(
  'LoggerStats',
  Type.Object({
    total_bytes_sent: Type.Integer(),
    total_bytes_received: Type.Integer(),
    total_bytes_filtered: Type.Integer(),
    last_regexps: Type.Array(Type.String()),
    concurrent_filters: Type.Integer(),
    concurrent_ingests: Type.Integer(),
    total_filters: Type.Integer(),
    total_ingests: Type.Integer(),
    block: Type.Object({
      bytes: Type.Integer(),
      lines: Type.Integer(),
      events: Type.Integer(),
      max_bytes: Type.Integer(),
    }),
  }),
);

/** A new key: the only answer that carries its secret. */
export const createdKey = named(
  'LoggerApiKey',
  Type.Object({
    id: Type.String(),
    name: Type.String(),
    key: Type.String(),
    secret: Type.String(),
    created_at: Type.String(),
  }),
);

export const ownerBody = Type.Object({
  user_id: Type.String({ minLength: 1, maxLength: MAX_OWNER_ID_LENGTH, pattern: '^[^\\u0000]*$' }),
});
export const owners = Type.Array(Type.String());

export const noContent = Type.Null({ description: 'empty body' });

/** The query of both streams (README: streams). */
export const streamQuery = Type.Object({
  regex: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
  follow: Type.Optional(Type.String()),
});

export const ingested = Type.Object({ n: Type.Integer() });
export const eventsIngested = Type.Object({ events: Type.Integer(), bytes: Type.Integer() });
