import { isDeepStrictEqual } from 'node:util';
import { asOpenApi31, OPERATION_METHODS, type OpenApiDocument } from '../core/openapi.ts';

/**
 * The platform's merged OpenAPI document (root README.md, One base URL; decision 47): every
 * service's own document with its paths under `/services/<name>`, so one generated client reaches
 * everything through one base URL.
 */

/** One service's document, and the name it is served under (`/services/<name>`). */
export interface ServiceDocument {
  name: string;
  document: OpenApiDocument;
}

const capitalized = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

/** `docdb` + `createDatabase` → `docdbCreateDatabase`: unique across services, still camelCase. */
function prefixedOperationId(service: string, operationId: string): string {
  return service + capitalized(operationId);
}

/** `docdb` + `Error` → `DocdbError`, for components two services define differently. */
function prefixedComponentName(service: string, name: string): string {
  return capitalized(service) + name;
}

/**
 * New names for each part's components: under a name several parts define, the definition most
 * of them share (the first seen on a tie) keeps the name, so the common error envelope and
 * security schemes stay one component; a part whose definition differs gets the name prefixed
 * with the service's (`FilesBucket`).
 */
function componentRenames(parts: readonly ServiceDocument[]): Map<string, Map<string, string>> {
  const definitions = new Map<string, unknown[]>(); // "<kind>/<name>" → the definitions seen
  for (const { document } of parts) {
    for (const [kind, entries] of Object.entries(document.components ?? {})) {
      for (const [name, definition] of Object.entries(entries)) {
        const key = `${kind}/${name}`;
        definitions.set(key, [...(definitions.get(key) ?? []), definition]);
      }
    }
  }
  const keeper = new Map<string, unknown>(); // "<kind>/<name>" → the definition that keeps the name
  for (const [key, seen] of definitions) {
    const count = (definition: unknown) => seen.filter((other) => isDeepStrictEqual(other, definition)).length;
    keeper.set(
      key,
      seen.reduce((best, definition) => (count(definition) > count(best) ? definition : best), seen[0]),
    );
  }
  const renames = new Map<string, Map<string, string>>();
  for (const { name: service, document } of parts) {
    const own = new Map<string, string>();
    for (const [kind, entries] of Object.entries(document.components ?? {})) {
      for (const [name, definition] of Object.entries(entries)) {
        const kept = isDeepStrictEqual(definition, keeper.get(`${kind}/${name}`));
        own.set(`${kind}/${name}`, kept ? name : prefixedComponentName(service, name));
      }
    }
    renames.set(service, own);
  }
  return renames;
}

/** A deep copy of `value` with every local `$ref` to a renamed component pointed at its new name. */
function withRefsRenamed(value: unknown, renames: ReadonlyMap<string, string>): unknown {
  if (Array.isArray(value)) return value.map((item) => withRefsRenamed(item, renames));
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (key === '$ref' && typeof item === 'string' && item.startsWith('#/components/')) {
      const target = item.slice('#/components/'.length);
      const kind = target.slice(0, target.indexOf('/'));
      const renamed = renames.get(target);
      out[key] = renamed === undefined ? item : `#/components/${kind}/${renamed}`;
    } else {
      out[key] = withRefsRenamed(item, renames);
    }
  }
  return out;
}

/**
 * Merges the services' documents into one: paths under `/services/<name>` (the service's own
 * path after it), operation ids prefixed with the service's name, each operation tagged with its
 * service (whose title and description become the tag's), a document-wide `security` of a part
 * moved onto its operations, components merged as `componentRenames` decides. The merged
 * document's server is the front door itself.
 */
export function mergeDocuments(
  parts: readonly ServiceDocument[],
  info: { title: string; version: string; description?: string },
): OpenApiDocument {
  // One version for the whole: 3.1 when any part is (docdb's and the scheduler's schemas need it),
  // the 3.0 parts carried over as the services do it themselves.
  const openapi = parts.some(({ document }) => document.openapi.startsWith('3.1')) ? '3.1.0' : '3.0.3';
  const renames = componentRenames(parts);
  const paths: OpenApiDocument['paths'] = {};
  const components: Record<string, Record<string, unknown>> = {};
  const tags: { name: string; description?: string }[] = [];
  for (const { name: service, document } of parts) {
    const own = renames.get(service)!;
    const renamed = withRefsRenamed(document, own) as OpenApiDocument;
    if (openapi !== renamed.openapi && openapi === '3.1.0') asOpenApi31(renamed);
    tags.push({
      name: service,
      description: [renamed.info.title, renamed.info.description]
        .filter((part) => typeof part === 'string' && part !== '')
        .join(': '),
    });
    for (const [kind, entries] of Object.entries(renamed.components ?? {})) {
      const target = (components[kind] ??= {});
      for (const [name, definition] of Object.entries(entries)) target[own.get(`${kind}/${name}`) ?? name] = definition;
    }
    for (const [path, item] of Object.entries(renamed.paths ?? {})) {
      const merged: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(item)) {
        if (!OPERATION_METHODS.has(key) || typeof value !== 'object' || value === null) {
          if (key !== 'servers') merged[key] = value;
          continue;
        }
        const operation = { ...(value as Record<string, unknown>) };
        if (typeof operation.operationId === 'string')
          operation.operationId = prefixedOperationId(service, operation.operationId);
        operation.tags = [service];
        if (operation.security === undefined && renamed.security !== undefined) operation.security = renamed.security;
        delete operation.servers;
        merged[key] = operation;
      }
      // Path-level keys (`parameters`, `summary`) ride along, as the core type's path items allow.
      paths[`/services/${service}${path === '/' ? '/' : path}`] = merged as OpenApiDocument['paths'][string];
    }
  }
  return {
    openapi,
    info,
    servers: [{ url: '/', description: 'The front door: every service under /services/<name>' }],
    tags,
    paths,
    components,
  };
}
