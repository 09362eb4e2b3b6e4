import type { Readable } from 'node:stream';
import type { ServiceApp } from '../../../../core/app.ts';
import { stringifyJson, type JsonValue } from '../../../../core/json.ts';
import { COLLECTION_ACTIONS, splitAction, type CollectionAction } from '../../actions.ts';
import { readJsonBody } from '../../body.ts';
import { DocdbErrors } from '../../errors.ts';
import { collectionParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { insertAction } from '../documents/insert.ts';
import { traversalAction } from '../documents/traverse.ts';
import { dropCollection, setDefaults, size } from './collection.ts';
import { collectionSegment, type ActionContext } from './common.ts';
import { createIndex, dropIndex, getIndex, listIndexes } from './indexes.ts';

/** The generic action route; routes/action-docs.ts describes each action as its own path. */
export const collectionActionsSchema = {
  tags: ['collections'],
  summary: 'Collection actions ({collection}:{action}); see the per-action paths',
  params: collectionParams,
};

/**
 * The colon actions of a collection (`POST …/collections/{collection}:{action}`): one POST route,
 * the body read by the action (the insert actions stream it), so this route lives in its own
 * context whose only parser hands the raw stream through. POST without an action is 405.
 */
export function registerCollectionActions(app: ServiceApp, { documents, access, filters }: RouteDeps): void {
  void app.register(async (actions: ServiceApp) => {
    actions.removeAllContentTypeParsers();
    actions.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    // Action answers (defaults, index records, sizes) may hold integers above 2^53.
    actions.setReplySerializer((payload) => stringifyJson(payload as JsonValue));
    actions.post(
      '/v1/databases/:databaseId/collections/:collection',
      { schema: collectionActionsSchema },
      async (request, reply) => {
        const stream = (request.body as Readable | undefined) ?? request.raw;
        const target = splitAction(collectionSegment(request), COLLECTION_ACTIONS);
        if (!target || !target.action) {
          stream.resume();
          throw DocdbErrors.collectionNeedsAction();
        }
        const database = await access.authorize(request, request.params.databaseId);
        return runAction(target.action, {
          request,
          reply,
          stream,
          databaseId: database.id,
          name: target.name,
          documents,
          filters,
        });
      },
    );
  });
}

/** The streaming actions read the body themselves; every other one gets it whole, parsed. */
async function runAction(action: CollectionAction, context: ActionContext): Promise<unknown> {
  switch (action) {
    case 'insert':
    case 'insertFullduplex':
    case 'insertStream':
      return insertAction(context, action);
    case 'find':
    case 'patch':
    case 'remove':
      return traversalAction(action, context);
    default:
      break;
  }
  const body = await readJsonBody(context.stream);
  switch (action) {
    case 'dropCollection':
      return dropCollection(context);
    case 'setDefaults':
      return setDefaults(context, body);
    case 'size':
      return size(context);
    case 'listIndexes':
      return listIndexes(context);
    case 'getIndex':
      return getIndex(context, body);
    case 'dropIndex':
      return dropIndex(context, body);
    case 'createIndex':
      return createIndex(context, body);
  }
}
