import { Type } from 'typebox';
import { named } from '../../core/openapi.ts';

/** Schemas the node's routes share (the OpenAPI document is built from them). */
export { errorBody } from '../../core/schemas.ts';
export const writeResult = named(
  'WriteResult',
  Type.Object({ ok: Type.Boolean(), seq: Type.Integer(), version: Type.Integer() }),
);
export const collectionResult = Type.Object({ ok: Type.Boolean(), collection: Type.String() });
export const entry = named(
  'Entry',
  Type.Object({
    key: Type.String(),
    value: Type.Unknown({ description: 'any JSON' }),
    version: Type.Integer(),
    updatedAt: Type.String(),
  }),
);
export const health = named('Health', Type.Object({ ok: Type.Boolean(), node: Type.String(), role: Type.String() }));
export const colParams = Type.Object({ col: Type.String() });
export const keyParams = Type.Object({ col: Type.String(), '*': Type.String() });

/** The description of every `/v1/…` route: the internal port's presence check. */
export const presence =
  'Needs X-Gateway-Authentication, or apikey + secret, or Api-Key + Api-Secret (presence only; values are not checked here). 403 `forbidden` otherwise.';
