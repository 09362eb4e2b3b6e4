import { Type } from 'typebox';
import { errorBody } from '../../core/schemas.ts';
import { named } from '../../core/openapi.ts';

// The JSON schemas docdb's routes share. Colon-action bodies are described for the OpenAPI
// document in routes/action-docs.ts; the database actions' bodies are also checked against the
// schemas here (routes/databases/common.ts `bodyCheck`).

/** Longest database and key name, in characters (code points). */
export const MAX_NAME_LENGTH = 200;
/** Longest user id accepted by `:addOwner` / `:deleteOwner`. */
export const MAX_OWNER_ID_LENGTH = 256;

export { errorBody };

const databaseName = Type.String({
  minLength: 1,
  maxLength: MAX_NAME_LENGTH,
  description: `1–${MAX_NAME_LENGTH} characters; need not be unique`,
});
const ownerId = Type.String({ minLength: 1, maxLength: MAX_OWNER_ID_LENGTH, description: 'a platform user id' });

// ---------------------------------------------------------------------------------------------
// Databases

export const databaseRecord = named(
  'Database',
  Type.Object({
    id: Type.String({ description: 'UUID v4' }),
    name: Type.String(),
    creation_date: Type.String({ description: 'RFC 3339 UTC' }),
    owners: Type.Array(Type.String(), { description: 'user ids: the creator first, then in the order added' }),
    api_keys: Type.Array(Type.String(), { description: 'public keys of the API keys, in creation order' }),
    owners_length: Type.Integer(),
  }),
);
export const databaseSummary = named(
  'DatabaseSummary',
  Type.Object({
    id: Type.String(),
    name: Type.String(),
    creation_date: Type.String(),
    owners_length: Type.Integer(),
  }),
);
export const deletedDatabase = Type.Object({ id: Type.String(), name: Type.String(), creation_date: Type.String() });
export const nameBody = Type.Object({ name: databaseName });
export const createKeyBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, description: `1–${MAX_NAME_LENGTH} characters` }),
});
export const deleteKeyBody = Type.Object({ key: Type.String({ minLength: 1, description: 'the public key' }) });
export const ownerBody = Type.Object({ owner_id: ownerId });
export const createdKey = Type.Object({
  name: Type.String(),
  key: Type.String({ description: 'UUID v4, sent as Api-Key' }),
  secret: Type.String({ description: 'UUID v4, sent as Api-Secret; shown only here' }),
  creation_date: Type.String(),
});
export const ownersList = Type.Array(Type.String(), { description: 'the owners after the change' });

// ---------------------------------------------------------------------------------------------
// Paths

/** `/v1/databases/:databaseId…` */
export const databaseParams = Type.Object({ databaseId: Type.String() });
/** `/v1/databases/:databaseId/collections/:collection…` */
export const collectionParams = Type.Object({ databaseId: Type.String(), collection: Type.String() });
/** `/v1/databases/:databaseId/collections/:collection/documents/:documentId` */
export const documentParams = Type.Object({
  databaseId: Type.String(),
  collection: Type.String(),
  documentId: Type.String(),
});
