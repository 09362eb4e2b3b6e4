import type { FastifyReply, FastifyRequest } from 'fastify';
import { DocdbErrors } from '../../errors.ts';
import { ownerBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { bodyCheck, noNul } from './common.ts';

const checkOwner = bodyCheck(ownerBody);

/** The `owner_id` of an owner action's body (checked first) and the database, once the caller may use it. */
async function ownerAction({ access }: RouteDeps, request: FastifyRequest, databaseName: string) {
  const owner = noNul('owner_id', checkOwner(request.body).owner_id);
  const database = await access.authorize(request, databaseName);
  return { owner, database };
}

/** `:addOwner`: 200 with the owners after the change; an existing owner is no change. */
export async function addOwner(
  deps: RouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  databaseName: string,
): Promise<FastifyReply> {
  const { owner, database } = await ownerAction(deps, request, databaseName);
  const owners = await deps.databases.addOwner(database.id, owner);
  if (!owners) throw DocdbErrors.databaseNotFound();
  return reply.code(200).send(owners);
}

/** `:deleteOwner`: 200 with the owners after the change; never yourself, never the last owner. */
export async function deleteOwner(
  deps: RouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  databaseName: string,
): Promise<FastifyReply> {
  const { owner, database } = await ownerAction(deps, request, databaseName);
  if (deps.access.userOf(request) === owner) throw DocdbErrors.ownerRemovesSelf();
  const result = await deps.databases.deleteOwner(database.id, owner);
  switch (result.status) {
    case 'deleted':
      return reply.code(200).send(result.owners);
    case 'not_found':
      throw DocdbErrors.databaseNotFound();
    case 'not_owner':
      throw DocdbErrors.ownerNotFound(owner);
    case 'last_owner':
      throw DocdbErrors.lastOwner();
  }
}
