import type { ServiceApp } from '../../../core/app.ts';
import { apiKeySecurity } from '../schemas.ts';

/** `GET /openapi.json`: OpenAPI 3.1.0 with the two key schemes on every operation that needs a key. */
export function registerOpenApi(app: ServiceApp): void {
  app.get('/openapi.json', { schema: { hide: true } }, async () => {
    const document = structuredClone(app.swagger()) as {
      openapi: string;
      paths: Record<string, Record<string, { security?: unknown }>>;
      components?: { securitySchemes?: Record<string, unknown> };
    };
    document.openapi = '3.1.0';
    document.components = {
      ...document.components,
      securitySchemes: {
        schedulerApiKey: {
          type: 'apiKey',
          in: 'header',
          name: 'X-API-Key',
          description: 'A scheduler API key (SCHEDULER_API_KEYS)',
        },
        schedulerBearer: { type: 'http', scheme: 'bearer', description: 'A scheduler API key as a bearer token' },
      },
    };
    // Every method but GET needs a key.
    for (const operations of Object.values(document.paths)) {
      for (const [method, operation] of Object.entries(operations))
        if (method !== 'get') operation.security = apiKeySecurity;
    }
    return document;
  });
}
