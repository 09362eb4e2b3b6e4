import { randomUUID } from 'node:crypto';
import { hash } from '@node-rs/bcrypt';
import type { ServiceApp } from '../../../core/app.ts';
import { notFound } from '../../../core/errors.ts';
import { requireIdentity } from '../../../core/identity.ts';
import { rfc3339 } from '../../../core/ids.ts';
import { assertMayManage } from '../access.ts';
import type { ApikeysEvents } from '../events.ts';
import type { ApikeysRepository, Scope } from '../repository.ts';
import { commonErrors, createKeyBody, createdKey, errorResponse, keyList, keyParams, revokedKey, type ScopeInput } from '../schemas.ts';

/** bcrypt cost for secrets (decisions §9): ~50 ms per hash, off the event loop. */
export const SECRET_HASH_COST = 10;

export interface KeyRoutesDeps {
  repository: ApikeysRepository;
  events: ApikeysEvents;
}

/** Every scope stored and returned with both members, `[]`/`{}` standing for "any". */
export function normaliseScopes(scopes: readonly ScopeInput[] | undefined): Scope[] {
  return (scopes ?? []).map((scope) => ({
    projects: [...(scope.projects ?? [])],
    // fromEntries defines own properties, so a host named `__proto__` stays an ordinary entry.
    host_rules: Object.fromEntries(Object.entries((scope.host_rules ?? {}) as Record<string, string>)),
  }));
}

export function registerKeyRoutes(app: ServiceApp, { repository, events }: KeyRoutesDeps): void {
  app.post(
    '/v0/apikeys',
    {
      schema: {
        tags: ['apikeys'],
        summary: 'Create an API key; the secret is returned only here',
        body: createKeyBody,
        response: { 201: createdKey, ...commonErrors, 403: errorResponse },
      },
    },
    async (request, reply) => {
      const identity = requireIdentity(request);
      await assertMayManage(identity, repository);
      const scopes = normaliseScopes(request.body.scopes);
      const key = randomUUID();
      const secret = randomUUID();
      await repository.createKey({
        key,
        owner: identity.user.id,
        name: request.body.name,
        secretHash: await hash(secret, SECRET_HASH_COST),
        scopes,
        createdAt: rfc3339(),
      });
      return reply.code(201).send({ key, secret, name: request.body.name, scopes });
    },
  );

  app.get(
    '/v0/apikeys',
    {
      schema: {
        tags: ['apikeys'],
        summary: "List the caller's API keys in creation order (no secrets)",
        response: { 200: keyList, 401: errorResponse },
      },
    },
    async (request) => {
      const identity = requireIdentity(request);
      return { api_keys: await repository.listKeys(identity.user.id) };
    },
  );

  app.delete(
    '/v0/apikeys/:key',
    {
      schema: {
        tags: ['apikeys'],
        summary: 'Revoke an API key; it stops working on every gateway at once',
        params: keyParams,
        response: { 200: revokedKey, ...commonErrors, 403: errorResponse, 404: errorResponse },
      },
    },
    async (request) => {
      const identity = requireIdentity(request);
      await assertMayManage(identity, repository);
      const { key } = request.params;
      if (!(await repository.deleteKey(identity.user.id, key))) throw notFound(`API key ${key} not found`);
      await events.keyRevoked({ key });
      return { key };
    },
  );
}
