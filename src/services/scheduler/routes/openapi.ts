import type { ServiceApp } from '../../../core/app.ts';
import { asOpenApi31, openApiDocument } from '../../../core/openapi.ts';

/** `GET /openapi.json`: OpenAPI 3.1.0; every operation that changes something names the scheduler key. */
export function registerOpenApi(app: ServiceApp): void {
  app.get('/openapi.json', { schema: { hide: true } }, async (request) => openApiDocument(app, request, asOpenApi31));
}
