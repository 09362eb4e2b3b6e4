import { hash } from '@node-rs/bcrypt';
import { Ajv } from 'ajv';
import type { FastifyRequest } from 'fastify';
import { Type, type Static, type TSchema } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { HttpError, notFound, validationError } from '../../../core/errors.ts';
import { newId, rfc3339 } from '../../../core/ids.ts';
import type { DocdbAccess } from '../access.ts';
import { DATABASE_ACTIONS, rawSegments, splitAction, type ActionTarget, type DatabaseAction } from '../actions.ts';
import { invalidJson } from '../body.ts';
import type { DatabaseRepository } from '../databases.ts';

/** bcrypt cost for database key secrets (docdb.md §4.6). */
export const SECRET_HASH_COST = 10;

/** Longest database and key name, in characters (code points). */
export const MAX_NAME_LENGTH = 200;
/** Longest user id accepted by `:addOwner` / `:deleteOwner`. */
export const MAX_OWNER_ID_LENGTH = 256;

const errorBody = Type.Object({
  error: Type.Object({ status: Type.Integer(), code: Type.String(), message: Type.String() }),
});

const databaseName = Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, description: `1–${MAX_NAME_LENGTH} characters; need not be unique` });
const ownerId = Type.String({ minLength: 1, maxLength: MAX_OWNER_ID_LENGTH, description: 'a platform user id' });

export const databaseRecord = Type.Object({
  id: Type.String({ description: 'UUID v4' }),
  name: Type.String(),
  creation_date: Type.String({ description: 'RFC 3339 UTC' }),
  owners: Type.Array(Type.String(), { description: 'user ids: the creator first, then in the order added' }),
  api_keys: Type.Array(Type.String(), { description: 'public keys of the API keys, in creation order' }),
  owners_length: Type.Integer(),
});
export const databaseSummary = Type.Object({
  id: Type.String(),
  name: Type.String(),
  creation_date: Type.String(),
  owners_length: Type.Integer(),
});
export const deletedDatabase = Type.Object({ id: Type.String(), name: Type.String(), creation_date: Type.String() });
export const nameBody = Type.Object({ name: databaseName });
export const createKeyBody = Type.Object({ name: Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, description: `1–${MAX_NAME_LENGTH} characters` }) });
export const deleteKeyBody = Type.Object({ key: Type.String({ minLength: 1, description: 'the public key' }) });
export const ownerBody = Type.Object({ owner_id: ownerId });
export const createdKey = Type.Object({
  name: Type.String(),
  key: Type.String({ description: 'UUID v4, sent as Api-Key' }),
  secret: Type.String({ description: 'UUID v4, sent as Api-Secret; shown only here' }),
  creation_date: Type.String(),
});
export const ownersList = Type.Array(Type.String(), { description: 'the owners after the change' });
const databaseParams = Type.Object({ databaseId: Type.String() });

/** For the OpenAPI document: each database action's summary, body schema and success response. */
export const DATABASE_ACTION_DOCS: Record<DatabaseAction, { summary: string; body: TSchema; status: number; response: TSchema | null }> = {
  createApiKey: {
    summary: 'Create an API key for the database; the secret is returned only here',
    body: createKeyBody,
    status: 201,
    response: createdKey,
  },
  deleteApiKey: { summary: 'Delete an API key of the database; it stops working at once', body: deleteKeyBody, status: 204, response: null },
  addOwner: { summary: 'Add an owner (an existing owner is no change); returns the owners', body: ownerBody, status: 200, response: ownersList },
  deleteOwner: { summary: 'Remove an owner other than yourself; returns the owners', body: ownerBody, status: 200, response: ownersList },
};

// Action bodies are checked here rather than by a route schema (one POST route serves them all),
// with the app's rules: exact types, no coercion, unknown fields ignored (docdb.md §1.2).
const ajv = new Ajv({ strict: false, allErrors: false, coerceTypes: false, removeAdditional: false, useDefaults: true });

function bodyCheck<S extends TSchema>(schema: S): (body: unknown) => Static<S> {
  const validate = ajv.compile(schema);
  return (body) => {
    requireBody(body);
    if (!validate(body)) {
      const first = validate.errors?.[0];
      throw validationError(first ? `body${first.instancePath.replace(/\//g, '.')} ${first.message ?? 'is invalid'}` : 'body is invalid');
    }
    return body as Static<S>;
  };
}

/** An empty body where one is required is malformed JSON (docdb.md §1.2). */
function requireBody(body: unknown): void {
  if (body === undefined) throw invalidJson();
}

/** PostgreSQL text cannot hold NUL, so no stored string may contain it (on either database). */
function noNul(field: string, value: string): string {
  if (value.includes('\0')) throw validationError(`body.${field} must not contain NUL characters`);
  return value;
}

const checkCreateKey = bodyCheck(createKeyBody);
const checkDeleteKey = bodyCheck(deleteKeyBody);
const checkOwner = bodyCheck(ownerBody);

function methodNotAllowed(request: FastifyRequest, allow: string): HttpError {
  const path = request.url.split('?')[0] ?? '';
  return new HttpError(405, 'method_not_allowed', `method ${request.method} is not allowed on ${path}`, { allow });
}

/**
 * The database and action named by the raw (still encoded) segment after `/v1/databases/`: Fastify's
 * params are decoded already, and an encoded colon must not split (docdb.md §1.1).
 */
function targetOf(request: FastifyRequest): ActionTarget<DatabaseAction> {
  const target = splitAction(rawSegments(request.raw.url ?? request.url)[3] ?? '', DATABASE_ACTIONS);
  if (!target) throw notFound('database not found');
  return target;
}

/** Route hook: GET, PATCH and DELETE name a database, never an action. */
async function refuseAction(request: FastifyRequest): Promise<void> {
  if (targetOf(request).action !== null) throw methodNotAllowed(request, 'POST');
}

/** Route hook: POST on a database exists only for its actions. */
async function requireAction(request: FastifyRequest): Promise<void> {
  if (targetOf(request).action === null) throw methodNotAllowed(request, 'GET, PATCH, DELETE');
}

async function bodyRequired(request: FastifyRequest): Promise<void> {
  requireBody(request.body);
}

export interface DatabaseRoutesDeps {
  databases: DatabaseRepository;
  access: DocdbAccess;
}

/**
 * Database endpoints (docdb.md §4). Order of checks: route and method (404/405), body (400), then
 * access (§2: 401/404/403), then the change. A rejected request changes nothing.
 */
export function registerDatabaseRoutes(app: ServiceApp, { databases, access }: DatabaseRoutesDeps): void {
  const tags = ['databases'];
  const identity = [{ gatewayIdentity: [] }];
  const scopedAccess = 'Access: the identity of an owner, or Api-Key + Api-Secret of a key of this database.';

  app.get(
    '/v1/databases',
    { schema: { tags, security: identity, summary: "List the caller's databases in creation order", response: { 200: Type.Array(databaseSummary), 401: errorBody } } },
    async (request) => {
      const owned = await databases.listOwnedBy(access.requireUser(request));
      return owned.map(({ id, name, creation_date, owners_length }) => ({ id, name, creation_date, owners_length }));
    },
  );

  app.post(
    '/v1/databases',
    {
      schema: {
        tags,
        security: identity,
        summary: 'Create a database owned by the caller',
        body: nameBody,
        response: { 201: databaseRecord, 400: errorBody, 401: errorBody },
      },
      preValidation: bodyRequired,
    },
    async (request, reply) => {
      const name = noNul('name', request.body.name);
      const owner = access.requireUser(request);
      return reply.code(201).send(await databases.create(name, owner));
    },
  );

  app.get(
    '/v1/databases/:databaseId',
    {
      schema: { tags, summary: 'Get a database', description: scopedAccess, params: databaseParams, response: { 200: databaseRecord, 401: errorBody, 403: errorBody, 404: errorBody, 405: errorBody } },
      onRequest: refuseAction,
    },
    async (request) => access.authorize(request, targetOf(request).name),
  );

  app.patch(
    '/v1/databases/:databaseId',
    {
      schema: {
        tags,
        summary: 'Rename a database',
        description: scopedAccess,
        params: databaseParams,
        body: nameBody,
        response: { 200: databaseRecord, 400: errorBody, 401: errorBody, 403: errorBody, 404: errorBody, 405: errorBody },
      },
      onRequest: refuseAction,
      preValidation: bodyRequired,
    },
    async (request) => {
      const name = noNul('name', request.body.name);
      const database = await access.authorize(request, targetOf(request).name);
      const renamed = await databases.rename(database.id, name);
      if (!renamed) throw notFound('database not found');
      return renamed;
    },
  );

  app.delete(
    '/v1/databases/:databaseId',
    {
      schema: {
        tags,
        summary: 'Delete a database with its collections, documents, indexes and keys',
        description: scopedAccess,
        params: databaseParams,
        response: { 200: deletedDatabase, 401: errorBody, 403: errorBody, 404: errorBody, 405: errorBody },
      },
      onRequest: refuseAction,
    },
    async (request) => {
      const database = await access.authorize(request, targetOf(request).name);
      const deleted = await databases.delete(database.id);
      if (!deleted) throw notFound('database not found');
      await access.revokeDatabase(deleted.id).catch((err: unknown) => request.log.error({ err, databaseId: deleted.id }, 'could not publish docdb key revocation'));
      return deleted;
    },
  );

  // The colon actions (`POST /v1/databases/{id}:createApiKey` …). One route for all of them, hidden
  // from the generated document; DATABASE_ACTION_DOCS describes each action as its own path.
  app.post('/v1/databases/:databaseId', { schema: { hide: true, params: databaseParams }, onRequest: requireAction }, async (request, reply) => {
    const target = targetOf(request);
    switch (target.action) {
      case 'createApiKey': {
        const name = noNul('name', checkCreateKey(request.body).name);
        const database = await access.authorize(request, target.name);
        const key = newId();
        const secret = newId();
        const creation_date = rfc3339();
        const secretHash = await hash(secret, SECRET_HASH_COST);
        if (!(await databases.createKey({ key, databaseId: database.id, name, secretHash, createdAt: creation_date }))) {
          throw notFound('database not found');
        }
        return reply.code(201).send({ name, key, secret, creation_date });
      }
      case 'deleteApiKey': {
        const { key } = checkDeleteKey(request.body);
        const database = await access.authorize(request, target.name);
        // The message never repeats the submitted value: it might be a secret pasted by mistake.
        if (!(await databases.deleteKey(database.id, key))) throw notFound('API key not found in this database');
        await access.revokeKey(key).catch((err: unknown) => request.log.error({ err, databaseId: database.id }, 'could not publish docdb key revocation'));
        return reply.code(204).send();
      }
      case 'addOwner': {
        const owner = noNul('owner_id', checkOwner(request.body).owner_id);
        const database = await access.authorize(request, target.name);
        const owners = await databases.addOwner(database.id, owner);
        if (!owners) throw notFound('database not found');
        return reply.code(200).send(owners);
      }
      case 'deleteOwner': {
        const owner = noNul('owner_id', checkOwner(request.body).owner_id);
        const database = await access.authorize(request, target.name);
        if (access.userOf(request) === owner) throw validationError('owners cannot remove themselves');
        const result = await databases.deleteOwner(database.id, owner);
        switch (result.status) {
          case 'deleted':
            return reply.code(200).send(result.owners);
          case 'not_found':
            throw notFound('database not found');
          case 'not_owner':
            throw notFound(`user ${JSON.stringify(owner)} is not an owner of this database`);
          case 'last_owner':
            throw validationError('a database must keep at least one owner');
        }
        break;
      }
      case null:
        break;
    }
    throw methodNotAllowed(request, 'GET, PATCH, DELETE');
  });
}
