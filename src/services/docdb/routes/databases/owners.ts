import type { FastifyReply, FastifyRequest } from 'fastify';
import { DocdbErrors } from '../../errors.ts';
import { ownerBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { bodyCheck, noNul } from './common.ts';

const checkOwner = bodyCheck(ownerBody);

/** `:addOwner`: 200 with the owners after the change; an existing owner is no change. */
export async function addOwner(
  { databases, access }: RouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  databaseName: string,
): Promise<FastifyReply> {
  const owner = noNul('owner_id', checkOwner(request.body).owner_id);
  const database = await access.authorize(request, databaseName);
  const owners = await databases.addOwner(database.id, owner);
  if (!owners) throw DocdbErrors.databaseNotFound();
  return reply.code(200).send(owners);
}

/** `:deleteOwner`: 200 with the owners after the change; never yourself, never the last owner. */
export async function deleteOwner(
  { databases, access }: RouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  databaseName: string,
): Promise<FastifyReply> {
  const owner = noNul('owner_id', checkOwner(request.body).owner_id);
  const database = await access.authorize(request, databaseName);
  if (access.userOf(request) === owner) throw DocdbErrors.ownerRemovesSelf();
  const result = await databases.deleteOwner(database.id, owner);
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
