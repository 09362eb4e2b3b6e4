import { Type } from 'typebox';
import { errorBody } from '../../core/schemas.ts';
import { named } from '../../core/openapi.ts';

export const entries = Type.Record(Type.String(), Type.Unknown(), {
  description: 'Entries map: string keys, any JSON values',
});

export const CONFIG_ID_PATTERN = '^[A-Za-z0-9._-]{1,128}$';

export const configId = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: CONFIG_ID_PATTERN,
  description: '1–128 characters from A–Z a–z 0–9 . _ -',
});

export const configObject = named('Config', Type.Object({ id: Type.String(), entries }));

export const createBody = Type.Object(
  {
    id: Type.Optional(configId),
    entries: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { additionalProperties: false },
);

/** Either `{"entries":{…}}` or a flat entries map; a null value deletes the key. */
export const patchBody = Type.Record(Type.String(), Type.Unknown(), {
  description: 'A patch: {"entries":{…}} (exactly that one member) or a flat map of entries. null deletes a key.',
});

export const idParams = Type.Object({ id: Type.String() });

export const userConfig = named('UserConfig', Type.Object({ entries }));

export const errors = {
  400: errorBody,
  404: errorBody,
  409: errorBody,
  413: errorBody,
} as const;

export const unauthorizedError = { 400: errorBody, 401: errorBody, 413: errorBody } as const;
