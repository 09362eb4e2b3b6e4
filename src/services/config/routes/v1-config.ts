import type { ServiceApp } from '../../../core/app.ts';
import { requireIdentity } from '../../../core/identity.ts';
import { patchOf } from '../entries.ts';
import type { ConfigRepository } from '../repository.ts';
import { patchBody, unauthorizedError, userConfig } from '../schemas.ts';

/** v1 per-user entries, reached with the caller's identity (config.md §3). */
export function registerV1Config(app: ServiceApp, repository: ConfigRepository): void {
  const tags = ['v1 user config'];
  const security = [{ gatewayIdentity: [] }];

  app.get(
    '/v1/config',
    { schema: { tags, security, summary: "The caller's entries map", response: { 200: userConfig, ...unauthorizedError } } },
    async (request) => {
      const identity = requireIdentity(request);
      return { entries: await repository.userEntries(identity.user.id) };
    },
  );

  app.patch(
    '/v1/config',
    { schema: { tags, security, summary: "Merge a patch into the caller's map; returns the whole map", body: patchBody, response: { 200: userConfig, ...unauthorizedError } } },
    async (request) => {
      const identity = requireIdentity(request);
      return { entries: await repository.patchUserEntries(identity.user.id, patchOf(request.body)) };
    },
  );
}
