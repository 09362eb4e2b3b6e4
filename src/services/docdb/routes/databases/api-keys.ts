import { hash } from '@node-rs/bcrypt';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { newId, rfc3339 } from '../../../../core/ids.ts';
import { DocdbErrors } from '../../errors.ts';
import { createKeyBody, deleteKeyBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { bodyCheck, noNul } from './common.ts';

/** bcrypt cost for database key secrets (README: Databases). */
export const SECRET_HASH_COST = 10;

const checkCreateKey = bodyCheck(createKeyBody);
const checkDeleteKey = bodyCheck(deleteKeyBody);

/** `:createApiKey`: 201 `{name,key,secret,creation_date}`; only the secret's bcrypt hash is stored. */
export async function createApiKey(
  { databases, access }: RouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  databaseName: string,
): Promise<FastifyReply> {
  const name = noNul('name', checkCreateKey(request.body).name);
  const database = await access.authorize(request, databaseName);
  const key = newId();
  const secret = newId();
  const creation_date = rfc3339();
  const secretHash = await hash(secret, SECRET_HASH_COST);
  if (!(await databases.createKey({ key, databaseId: database.id, name, secretHash, createdAt: creation_date }))) {
    throw DocdbErrors.databaseNotFound();
  }
  return reply.code(201).send({ name, key, secret, creation_date });
}

/** `:deleteApiKey`: 204; the key stops working at once on every instance. */
export async function deleteApiKey(
  { databases, access }: RouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  databaseName: string,
): Promise<FastifyReply> {
  const { key } = checkDeleteKey(request.body);
  const database = await access.authorize(request, databaseName);
  if (!(await databases.deleteKey(database.id, key))) throw DocdbErrors.apiKeyNotFound();
  await access
    .revokeKey(key)
    .catch((err: unknown) =>
      request.log.error({ err, databaseId: database.id }, 'could not publish docdb key revocation'),
    );
  return reply.code(204).send();
}
