import type { ServiceApp } from '../../../core/app.ts';
import { FilesErrors } from '../errors.ts';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/**
 * Explicit 405s for the other methods of a raw-body path. The app's generic 405 answers from the
 * not-found handler, which runs after the root scope's JSON parser has read the body: a binary
 * body sent with the wrong method would be a 400 `invalid_json` there instead of a 405.
 */
export function methodNotAllowed(raw: ServiceApp, url: string, allowed: readonly string[]): void {
  // A GET route answers HEAD too (Fastify exposes it, or this service registers its own).
  const others = METHODS.filter((m) => !allowed.includes(m) && !(m === 'HEAD' && allowed.includes('GET')));
  const allow = [...allowed, ...(allowed.includes('GET') && !allowed.includes('HEAD') ? ['HEAD'] : [])].join(', ');
  raw.route({
    method: others,
    url,
    schema: { hide: true },
    handler: async (request) => {
      throw FilesErrors.methodNotAllowed(request.method, request.url.split('?')[0]!, allow);
    },
  });
}
