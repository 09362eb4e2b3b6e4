import { request as undiciRequest } from 'undici';
import type { ServiceName } from '../config.ts';
import type { ServiceApp } from '../core/app.ts';
import type { OpenApiDocument } from '../core/openapi.ts';
import { mergeDocuments, type ServiceDocument } from './openapi-merge.ts';
import { PLATFORM_HOSTS } from './routing.ts';

const FETCH_TIMEOUT_MS = 2_000;

/** Every service serves its document at `/openapi.json` (lambda also at its contract path `/openapi`). */
const DOCUMENT_PATH = '/openapi.json';

export interface PlatformDocumentSources {
  version: string;
  domain: string;
  services: ReadonlyMap<ServiceName, ServiceApp>;
  upstreamUrls: Readonly<Partial<Record<ServiceName, string>>>;
}

/** `value` when it looks like an OpenAPI 3 document (what the merge reads), else null. */
function openApiDocument(value: unknown): OpenApiDocument | null {
  if (typeof value !== 'object' || value === null) return null;
  const { openapi, info, paths } = value as Partial<OpenApiDocument>;
  const ok =
    typeof openapi === 'string' &&
    openapi.startsWith('3.') &&
    typeof info?.title === 'string' &&
    typeof paths === 'object' &&
    paths !== null;
  return ok ? (value as OpenApiDocument) : null;
}

/** A service's own document as it serves it: in process without a socket, remote over HTTP; null when it does not answer. */
async function serviceDocument(
  sources: PlatformDocumentSources,
  service: ServiceName,
): Promise<OpenApiDocument | null> {
  const headers = { host: `${service}.${sources.domain}` };
  const app = sources.services.get(service);
  if (app) {
    const response = await app.inject({ method: 'GET', url: DOCUMENT_PATH, headers });
    return response.statusCode === 200 ? openApiDocument(response.json()) : null;
  }
  const url = sources.upstreamUrls[service];
  if (!url) return null;
  try {
    const response = await undiciRequest(`${url}${DOCUMENT_PATH}`, {
      headers,
      headersTimeout: FETCH_TIMEOUT_MS,
      bodyTimeout: FETCH_TIMEOUT_MS,
    });
    if (response.statusCode !== 200) {
      await response.body.dump();
      return null;
    }
    return openApiDocument(await response.body.json());
  } catch {
    return null;
  }
}

/**
 * The platform's merged document (root README.md, One base URL): the gateway's own and every
 * service running here or on a known upstream, in the platform's host order, each under
 * `/services/<name>`. A service that runs nowhere known, or does not answer within 2 s, is left
 * out and named in the description, so the document says what it does not cover.
 */
export async function platformDocument(
  sources: PlatformDocumentSources,
  gateway: OpenApiDocument,
): Promise<OpenApiDocument> {
  const names = PLATFORM_HOSTS.filter((host): host is ServiceName => host !== 'api' && host !== 'gateway');
  const documents = await Promise.all(names.map((name) => serviceDocument(sources, name)));
  const parts: ServiceDocument[] = [];
  const missing: string[] = [];
  names.forEach((name, i) => {
    const document = documents[i];
    if (document) parts.push({ name, document });
    else missing.push(name);
  });
  parts.push({ name: 'gateway', document: gateway });
  const description =
    'Every Stratus service through one base URL: each under /services/<name> on the front door.' +
    (missing.length > 0 ? ` Not running here or on a known upstream, so not described: ${missing.join(', ')}.` : '');
  return mergeDocuments(parts, { title: 'Stratus platform', version: sources.version, description });
}
