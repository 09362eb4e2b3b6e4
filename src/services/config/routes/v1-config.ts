import type { ServiceApp } from '../../../core/app.ts';
import { requireIdentity } from '../../../core/identity.ts';
import { patchOf } from '../entries.ts';
import { patchBody, unauthorizedError, userConfig } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';
import { SIGNED_IN } from '../../../core/openapi.ts';

const tags = ['v1 user config'];
const security = SIGNED_IN;

export const getUserConfigSchema = {
  tags,
  operationId: 'getUserConfig',
  security,
  summary: "The caller's entries map",
  response: { 200: userConfig, ...unauthorizedError },
};
export const patchUserConfigSchema = {
  tags,
  operationId: 'patchUserConfig',
  security,
  summary: "Merge a patch into the caller's map; returns the whole map",
  body: patchBody,
  response: { 200: userConfig, ...unauthorizedError },
};

/** v1 per-user entries (README): `/v1/config`, reached with the caller's identity. */
export function registerV1Config(app: ServiceApp, { repository }: RouteDeps): void {
  app.get('/v1/config', { schema: getUserConfigSchema }, async (request) => {
    const identity = requireIdentity(request);
    return { entries: await repository.userEntries(identity.user.id) };
  });

  app.patch('/v1/config', { schema: patchUserConfigSchema }, async (request) => {
    const identity = requireIdentity(request);
    return { entries: await repository.patchUserEntries(identity.user.id, patchOf(request.body)) };
  });
}
