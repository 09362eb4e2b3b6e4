import { Type, type Static } from 'typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { FilterTimeLimitError } from '../../filters.ts';
import { compilePatterns } from '../../patterns.ts';
import { idParams, scoped, scopedErrors, streamQuery } from '../../schemas.ts';
import { runStream } from '../../streams.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN, type RouteDocs } from '../../../../core/openapi.ts';

/** The stream query plus `after`, the resume cursor a stream's `x-logs-cursor` trailer gives (README: Reconnecting). */
export const resumableStreamQuery = Type.Object({
  ...streamQuery.properties,
  after: Type.Optional(
    Type.String({
      pattern: '^[0-9]{1,15}$',
      description:
        'Resume cursor: the x-logs-cursor trailer of an earlier stream; only what was stored after it is sent',
    }),
  ),
});

/** The schema of both streams; only the summary differs. */
export function streamSchema(operationId: string, mediaType: 'application/x-ndjson' | 'text/plain', summary: string) {
  return {
    operationId,
    security: SIGNED_IN,
    tags: ['streams'],
    summary,
    description: `${scoped} A stream that ends by itself (catch-up done, logger deleted, instance shutting down) ends with the trailer \`x-logs-cursor\` (HTTP/1.1 chunked); pass it as \`after\` to resume without loss or repetition.`,
    params: idParams,
    querystring: resumableStreamQuery,
    response: { 200: Type.String(), ...scopedErrors },
    openapi: {
      responses: {
        200: {
          [mediaType]: {
            type: 'string',
            description: mediaType === 'text/plain' ? 'Matching lines' : 'One JSON event per line',
          },
        },
      },
    } satisfies RouteDocs,
  };
}

/**
 * A filter or events stream (README: streams): access first (a stranger learns nothing), then
 * every pattern compiles before streaming; then the reply is hijacked and written by `runStream`.
 */
export async function serveStream(
  request: FastifyRequest,
  reply: FastifyReply,
  target: { id: string; kind: 'raw' | 'event'; query: Static<typeof resumableStreamQuery> },
  { loggers, access, hub, stats, filters, metrics }: RouteDeps,
): Promise<void> {
  const { kind, query } = target;
  const { loggerId } = await access.authorize(request, target.id);
  const patterns = compilePatterns(query.regex);
  const follow = query.follow !== undefined;
  const after = query.after === undefined ? 0 : Number(query.after);
  reply.hijack();
  await runStream(
    reply.raw,
    { loggerId, kind, patterns, follow, after },
    { loggers, hub, stats, filters, ...(metrics ? { metrics } : {}) },
  ).catch((error: unknown) => {
    if (error instanceof FilterTimeLimitError)
      request.log.warn({ loggerId, patterns: patterns.map((p) => p.source) }, `logs stream cut off: ${error.message}`);
    else request.log.error({ err: error }, 'logs stream failed');
    reply.raw.destroy();
  });
}
