import { Type } from 'typebox';
import type { ServiceApp } from '../../../../core/app.ts';
import type { RouteDeps } from '../deps.ts';
import { ANONYMOUS } from '../../../../core/openapi.ts';

export const releaseSchema = {
  tags: ['service'],
  operationId: 'getRelease',
  security: ANONYMOUS,
  summary: 'The release, as a JSON string',
  response: { 200: Type.String() },
};

/** `GET /release`: the version as a JSON string (README: Service endpoints). */
export function registerRelease(app: ServiceApp, { version }: RouteDeps): void {
  app.get('/release', { schema: releaseSchema }, async (_request, reply) =>
    reply.type('application/json').send(JSON.stringify(version)),
  );
}
