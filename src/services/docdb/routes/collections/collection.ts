import type { FastifyReply } from 'fastify';
import { MAX_NESTING, nestedDeeperThan, type JsonValue } from '../../../../core/json.ts';
import { requireObject } from '../../body.ts';
import { DocdbErrors } from '../../errors.ts';
import { checkCollectionName, existing, type ActionContext } from './common.ts';

// The colon actions on a collection as a whole (README: Collections).

/** `:dropCollection`: 204; the documents, indexes, defaults and counter go with it. */
export async function dropCollection({ reply, documents, databaseId, name }: ActionContext): Promise<FastifyReply> {
  if (!(await documents.dropCollection(databaseId, name))) throw DocdbErrors.collectionNotFound();
  return reply.code(204).send();
}

/** `:setDefaults`: merges the body into the defaults (null deletes a key), creating the collection when missing. */
export async function setDefaults(
  { reply, documents, databaseId, name }: ActionContext,
  body: JsonValue | undefined,
): Promise<FastifyReply> {
  checkCollectionName(name);
  const patch = requireObject(body);
  // Defaults become members of documents, which may nest MAX_NESTING levels.
  if (nestedDeeperThan(patch, MAX_NESTING)) throw DocdbErrors.defaultsTooDeep(MAX_NESTING);
  return reply.send(await documents.setDefaults(databaseId, name, patch));
}

/** `:size`: estimated sizes in bytes (`memory`, `disk`, `index.<name>`). */
export async function size(context: ActionContext): Promise<Record<string, number>> {
  return context.documents.size(await existing(context));
}
