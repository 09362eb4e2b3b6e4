import type { ServiceApp } from '../../../../core/app.ts';
import type { RouteDeps } from '../deps.ts';
import { serveStream, streamSchema } from './common.ts';

export const filterStreamSchema = streamSchema(
  'streamLines',
  'text/plain',
  'Stream matching raw lines (text/plain); every regex must match; follow keeps the stream open',
);

/** `GET /v1/loggers/:id/filter`: the logger's raw lines that match every `regex`, as stored. */
export function registerFilterStream(app: ServiceApp, deps: RouteDeps): void {
  app.get('/v1/loggers/:id/filter', { schema: filterStreamSchema }, async (request, reply) =>
    serveStream(request, reply, { id: request.params.id, kind: 'raw', query: request.query }, deps),
  );
}
