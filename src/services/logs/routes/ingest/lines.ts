import type { ServiceApp } from '../../../../core/app.ts';
import { errorBody, idParams, ingested, scoped, scopedErrors } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { asLines, ingest, rawBody } from './common.ts';
import { SIGNED_IN, type RouteDocs } from '../../../../core/openapi.ts';

export const ingestLinesSchema = {
  tags: ['ingest'],
  operationId: 'ingestLines',
  security: SIGNED_IN,
  summary: 'Append the body bytes as lines; answers once durably stored',
  description: scoped,
  openapi: {
    rawBody: {
      mediaTypes: ['text/plain', 'application/octet-stream'],
      description: 'Bytes taken as lines (any Content-Type); stored as received',
    },
  } satisfies RouteDocs,
  params: idParams,
  response: { 200: ingested, ...scopedErrors, 413: errorBody },
};

/** `POST /v1/loggers/:id/ingest` (in the raw-body scope): `n` counts the bytes received. */
export function registerIngestLines(scope: ServiceApp, deps: RouteDeps): void {
  const { access } = deps;
  scope.post('/v1/loggers/:id/ingest', { schema: ingestLinesSchema }, async (request) => {
    const { loggerId } = await access.authorize(request, request.params.id);
    const body = rawBody(request);
    const batch = async () => {
      const { data, lines } = await asLines(body);
      return { data, count: lines };
    };
    await ingest(request, deps, loggerId, 'raw', body.length, body.length === 0 ? null : batch);
    return { n: body.length };
  });
}
