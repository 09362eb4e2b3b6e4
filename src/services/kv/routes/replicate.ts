import { Type } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { errorBody, presence } from '../schemas.ts';
import type { KvNode } from './common.ts';
import { SIGNED_IN, type RouteDocs } from '../../../core/openapi.ts';

const replicateSchema = {
  tags: ['replication'],
  operationId: 'replicate',
  security: SIGNED_IN,
  summary: 'Subscribe to this node: NDJSON baseline, PING, then live commands; the stream does not end on its own',
  description: `${presence} \`since=<seq>\` (an extension) resumes after that seq without a baseline when this node's log still holds what follows (the answer then carries \`X-Kv-Resumed\`). \`X-Kv-Snapshot-Seq\` names the baseline's seq. A replica that has no complete baseline of its own yet answers 503 \`service_unavailable\` (with \`Retry-After\`).`,
  querystring: Type.Object({ since: Type.Optional(Type.String({ pattern: '^\\d{1,15}$' })) }),
  openapi: {
    responses: { 200: { 'application/x-ndjson': { type: 'string', description: 'One JSON command per line' } } },
  } satisfies RouteDocs,
  response: { 200: Type.String({ description: 'application/x-ndjson' }), 403: errorBody, 503: errorBody },
};

/** The replication feed: children subscribe here (feed.ts writes the stream). */
export function registerReplicateRoute(app: ServiceApp, node: KvNode): void {
  app.post('/v1/replicate', { schema: replicateSchema }, async (request, reply) => {
    const since = request.query.since === undefined ? undefined : Number(request.query.since);
    // The stream outlives the handler: the feed owns the socket from here on.
    reply.hijack();
    await node.feed.serve(reply.raw, since, node.parentUrl !== undefined).catch((error: unknown) => {
      request.log.warn({ err: error }, 'kv replication stream failed');
      reply.raw.destroy();
    });
  });
}
