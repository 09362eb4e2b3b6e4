import { SIGNED_IN, type OpenApiDocument } from '../../core/openapi.ts';

/**
 * Operation ids and credentials of the project routes, added to the generated document here so
 * that the route files keep to their own concern (every management route needs a signed-in caller:
 * the gateway requires it, README.md).
 */
const PROJECT_OPERATIONS: Record<string, Record<string, string>> = {
  '/v0/projects': { post: 'createProject', get: 'listProjects' },
  '/v0/projects/{id}': { get: 'getProject', delete: 'deleteProject' },
};

export function describeProjectRoutes(document: OpenApiDocument): void {
  for (const [path, operations] of Object.entries(PROJECT_OPERATIONS))
    for (const [method, operationId] of Object.entries(operations)) {
      const operation = document.paths[path]?.[method];
      if (!operation) continue;
      operation.operationId ??= operationId;
      operation.security ??= SIGNED_IN;
    }
}
