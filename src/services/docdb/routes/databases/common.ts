import { Ajv } from 'ajv';
import type { FastifyRequest } from 'fastify';
import type { Static, TSchema } from 'typebox';
import { DATABASE_ACTIONS, rawSegments, splitAction, type ActionTarget, type DatabaseAction } from '../../actions.ts';
import type { HttpError } from '../../../../core/errors.ts';
import { DocdbErrors } from '../../errors.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

// Database routes check, in this order: route and method (404/405), body (400), then access
// (README: Access; 401/404/403), then the change. A rejected request changes nothing.

/** Every database route but list and create takes an owner's identity or a key of the database. */
export const scopedAccess = 'Access: the identity of an owner, or Api-Key + Api-Secret of a key of this database.';
/** Identity-only routes (list and create). */
export const identity = SIGNED_IN;
/** Owner identity or a database key: both arrive as the platform's credential forms (Api-Key + Api-Secret). */
export const scopedSecurity = SIGNED_IN;

// Action bodies are checked here rather than by a route schema (one POST route serves them all),
// with the app's rules: exact types, no coercion, unknown fields ignored (README: Requests).
const ajv = new Ajv({
  strict: false,
  allErrors: false,
  coerceTypes: false,
  removeAdditional: false,
  useDefaults: true,
});

/** A checker of an action body against `schema`: the body, typed, or 400 naming the first problem. */
export function bodyCheck<S extends TSchema>(schema: S): (body: unknown) => Static<S> {
  const validate = ajv.compile(schema);
  return (body) => {
    requireBody(body);
    if (!validate(body)) {
      const first = validate.errors?.[0];
      throw first
        ? DocdbErrors.bodyInvalid(first.instancePath.replace(/\//g, '.'), first.message ?? 'is invalid')
        : DocdbErrors.bodyInvalid('', 'is invalid');
    }
    return body as Static<S>;
  };
}

/** An empty body where one is required is malformed JSON (README: Requests). */
function requireBody(body: unknown): void {
  if (body === undefined) throw DocdbErrors.malformedJson();
}

/** Route hook of the routes with a body schema: the empty-body check comes before the schema's. */
export async function bodyRequired(request: FastifyRequest): Promise<void> {
  requireBody(request.body);
}

/** PostgreSQL text cannot hold NUL, so no stored string may contain it (on either database). */
export function noNul(field: string, value: string): string {
  if (value.includes('\0')) throw DocdbErrors.fieldHasNul(field);
  return value;
}

/** 405 for this request's method and path; `allow` lists the methods the path takes. */
export function methodNotAllowed(request: FastifyRequest, allow: string): HttpError {
  const path = request.url.split('?')[0] ?? '';
  return DocdbErrors.methodNotAllowed(request.method, path, allow);
}

/**
 * The database and action named by the raw (still encoded) segment after `/v1/databases/`: Fastify's
 * params are decoded already, and an encoded colon must not split (README: Action routing).
 */
export function targetOf(request: FastifyRequest): ActionTarget<DatabaseAction> {
  const target = splitAction(rawSegments(request.raw.url ?? request.url)[3] ?? '', DATABASE_ACTIONS);
  if (!target) throw DocdbErrors.databaseNotFound();
  return target;
}

/** Route hook: GET, PATCH and DELETE name a database, never an action. */
export async function refuseAction(request: FastifyRequest): Promise<void> {
  if (targetOf(request).action !== null) throw methodNotAllowed(request, 'POST');
}

/** Route hook: POST on a database exists only for its actions. */
export async function requireAction(request: FastifyRequest): Promise<void> {
  if (targetOf(request).action === null) throw methodNotAllowed(request, 'GET, PATCH, DELETE');
}
