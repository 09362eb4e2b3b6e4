import { isDeepStrictEqual } from 'node:util';

/**
 * The platform's merged OpenAPI document (root README.md, One base URL; decision 47): every
 * service's own document with its paths under `/services/<name>`, so one generated client reaches
 * everything through one base URL.
 */

/** The parts of an OpenAPI 3.0 document the merge reads; everything else passes through. */
export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description?: string };
  servers?: { url: string; description?: string }[];
  paths?: Record<string, Record<string, unknown>>;
  components?: Record<string, Record<string, unknown>>;
  security?: Record<string, string[]>[];
  tags?: { name: string; description?: string }[];
  [key: string]: unknown;
}

/** One service's document, and the name it is served under (`/services/<name>`). */
export interface ServiceDocument {
  name: string;
  document: OpenApiDocument;
}

const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

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
 * New names for each part's components: a name every part that defines it defines the same way
 * is kept (the shared error envelope, the security schemes); a name defined differently by two
 * parts is prefixed with the service's name in every part that has it.
 */
function componentRenames(parts: readonly ServiceDocument[]): Map<string, Map<string, string>> {
  const definitions = new Map<string, unknown[]>(); // "<kind>/<name>" → definitions seen
  for (const { document } of parts) {
    for (const [kind, entries] of Object.entries(document.components ?? {})) {
      for (const [name, definition] of Object.entries(entries)) {
        const key = `${kind}/${name}`;
        const seen = definitions.get(key) ?? [];
        seen.push(definition);
        definitions.set(key, seen);
      }
    }
  }
  const renames = new Map<string, Map<string, string>>();
  for (const { name: service, document } of parts) {
    const own = new Map<string, string>();
    for (const [kind, entries] of Object.entries(document.components ?? {})) {
      for (const name of Object.keys(entries)) {
        const seen = definitions.get(`${kind}/${name}`)!;
        const shared = seen.every((definition) => isDeepStrictEqual(definition, seen[0]));
        own.set(`${kind}/${name}`, shared ? name : prefixedComponentName(service, name));
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
  info: OpenApiDocument['info'],
  openapi = '3.0.3',
): OpenApiDocument {
  const renames = componentRenames(parts);
  const paths: Record<string, Record<string, unknown>> = {};
  const components: Record<string, Record<string, unknown>> = {};
  const tags: { name: string; description?: string }[] = [];
  for (const { name: service, document } of parts) {
    const own = renames.get(service)!;
    const renamed = withRefsRenamed(document, own) as OpenApiDocument;
    tags.push({
      name: service,
      description: [renamed.info.title, renamed.info.description].filter(Boolean).join(': '),
    });
    for (const [kind, entries] of Object.entries(renamed.components ?? {})) {
      const target = (components[kind] ??= {});
      for (const [name, definition] of Object.entries(entries)) target[own.get(`${kind}/${name}`) ?? name] = definition;
    }
    for (const [path, item] of Object.entries(renamed.paths ?? {})) {
      const merged: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(item)) {
        if (!METHODS.has(key) || typeof value !== 'object' || value === null) {
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
      paths[`/services/${service}${path === '/' ? '/' : path}`] = merged;
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
