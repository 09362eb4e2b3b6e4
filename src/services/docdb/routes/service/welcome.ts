import { Type } from 'typebox';
import type { ServiceApp } from '../../../../core/app.ts';
import type { RouteDeps } from '../deps.ts';
import { ANONYMOUS } from '../../../../core/openapi.ts';

export const welcomeSchema = {
  tags: ['service'],
  operationId: 'getWelcome',
  security: ANONYMOUS,
  summary: 'Welcome',
  response: { 200: Type.Object({ service: Type.String(), version: Type.String() }) },
};

/** `GET /v1`: `{"service":"docdb","version":"…"}` (README: Service endpoints). */
export function registerWelcome(app: ServiceApp, { version }: RouteDeps): void {
  app.get('/v1', { schema: welcomeSchema }, async () => ({ service: 'docdb', version }));
}
