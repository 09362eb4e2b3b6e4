import { Type, type Static } from 'typebox';
import { closedErrorBody as errorBody } from '../../core/schemas.ts';
import { named } from '../../core/openapi.ts';

/**
 * Request and response schemas. Every object is closed (`additionalProperties: false`) so unknown
 * fields are 400s on the way in, and on the way out the serializer writes only the listed fields:
 * a secret hash or owner column can never reach a response by accident.
 */

const closed = { additionalProperties: false } as const;

/** A DNS label (README: Slugs). */
export const SLUG_PATTERN = '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$';

/** host → metadata string; a map, so its values (not its keys) are what the schema constrains. */
const hostRules = Type.Object(
  {},
  {
    additionalProperties: Type.String(),
    description: 'Request host → metadata string passed to backends as auth.host_metadata; {} = any host',
  },
);

const scopeIn = Type.Object(
  {
    projects: Type.Optional(
      Type.Array(Type.String({ minLength: 1 }), {
        description: 'Project ids; [] or absent = any project. Ids need not exist yet.',
      }),
    ),
    host_rules: Type.Optional(hostRules),
  },
  closed,
);

const scopeOut = Type.Object({ projects: Type.Array(Type.String()), host_rules: hostRules }, closed);

const keyName = Type.String({ minLength: 1, maxLength: 200, description: 'Label, 1–200 characters' });

export const createKeyBody = Type.Object(
  {
    name: keyName,
    scopes: Type.Optional(Type.Array(scopeIn, { description: 'Where the key is valid; [] or absent = everywhere' })),
  },
  closed,
);
export type CreateKeyBody = Static<typeof createKeyBody>;
export type ScopeInput = Static<typeof scopeIn>;

export const createdKey = named(
  'CreatedApiKey',
  Type.Object(
    {
      key: Type.String({ description: 'Public id, sent as Api-Key' }),
      secret: Type.String({ description: 'Sent as Api-Secret; shown only in this response' }),
      name: Type.String(),
      scopes: Type.Array(scopeOut),
    },
    { ...closed, description: 'The new key, with its secret (shown only here)' },
  ),
);

const keySummary = Type.Object({ key: Type.String(), name: Type.String(), scopes: Type.Array(scopeOut) }, closed);

export const keyList = named(
  'ApiKeyList',
  Type.Object(
    { api_keys: Type.Array(keySummary) },
    { ...closed, description: "The caller's keys in creation order, without secrets" },
  ),
);

export const keyParams = Type.Object({ key: Type.String() }, closed);

export const revokedKey = Type.Object({ key: Type.String() }, { ...closed, description: 'The revoked key' });

/** At most this many allowed origins per project. */
export const MAX_ALLOWED_ORIGINS = 50;

const allowedOrigins = Type.Array(Type.String({ minLength: 1, maxLength: 2048, pattern: '^https?://[^/?#@\\s]+$' }), {
  maxItems: MAX_ALLOWED_ORIGINS,
  description:
    'Origins (scheme://host[:port], no path, no wildcard) whose pages may call the platform with plain CORS: apps there send an API key or bearer token, never the session cookie. The project host itself is always allowed.',
});

export const createProjectBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200, description: 'Display name, 1–200 characters' }),
    slug: Type.Optional(
      Type.String({
        pattern: SLUG_PATTERN,
        description:
          'DNS label (a–z, 0–9, inner hyphens, 1–63 characters), unique across all users; generated from the name when absent',
      }),
    ),
    allowed_origins: Type.Optional(allowedOrigins),
  },
  closed,
);
export type CreateProjectBody = Static<typeof createProjectBody>;

export const updateProjectBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Display name, 1–200 characters' })),
    allowed_origins: Type.Optional(allowedOrigins),
  },
  { ...closed, minProperties: 1, description: 'What to change; the slug is fixed' },
);
export type UpdateProjectBody = Static<typeof updateProjectBody>;

export const project = Type.Object(
  {
    id: Type.String({ description: 'project-<uuid>' }),
    name: Type.String(),
    slug: Type.String(),
    host: Type.String({ description: '<slug>.<domain>' }),
    owners: Type.Array(Type.String(), { description: 'User ids, the creator first' }),
    allowed_origins: Type.Array(Type.String(), { description: 'Origins allowed plain CORS, in the order given' }),
    created_at: Type.String({ format: 'date-time' }),
  },
  { ...closed, description: 'A project' },
);
export type ProjectBody = Static<typeof project>;

export const projectList = Type.Array(project, { description: "The caller's projects in creation order" });

export const projectParams = Type.Object({ id: Type.String() }, closed);

/** Error responses every route documents: bad input and missing identity. */
export const commonErrors = { 400: errorBody, 401: errorBody } as const;
export const errorResponse = errorBody;
