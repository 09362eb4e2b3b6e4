import { Type } from 'typebox';
import { named } from './openapi.ts';

// The JSON schema of the error envelope `{"error":{"status":N,"code":"…","message":"…"}}` that every
// service answers with (README: Addressing; errors.ts `envelope`), for its routes' error responses.

const closed = { additionalProperties: false } as const;
const fields = () => ({ status: Type.Integer(), code: Type.String(), message: Type.String() });

export const errorBody = named('Error', Type.Object({ error: Type.Object(fields()) }));

/**
 * The same envelope closed (`additionalProperties: false`), for the services whose every schema is
 * closed (apikeys, auth: their READMEs, `schemas.ts`): the serializer writes only the listed fields.
 */
export const closedErrorBody = named(
  'Error',
  Type.Object({ error: Type.Object(fields(), closed) }, { ...closed, description: 'Error envelope' }),
);
