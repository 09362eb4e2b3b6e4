import type { ServiceApp } from '../../../core/app.ts';
import { DocdbErrors } from '../errors.ts';

/**
 * docdb's response conventions (README: Requests, Responses), for every route registered after
 * them: an empty body where a route's schema requires one is `invalid_json`, and a single JSON body
 * ends in a line break.
 */
export function registerConventions(app: ServiceApp): void {
  // A callback hook, not an async one: it runs on every request, and a promise per request costs.
  app.addHook('preValidation', (request, _reply, done) => {
    done(request.routeOptions.schema?.body && request.body === undefined ? DocdbErrors.malformedJson() : undefined);
  });
  app.addHook('onSend', async (_request, reply, payload) => {
    if (typeof payload !== 'string' || payload.endsWith('\n')) return payload;
    const type = reply.getHeader('content-type');
    return typeof type === 'string' && type.startsWith('application/json') ? `${payload}\n` : payload;
  });
}
