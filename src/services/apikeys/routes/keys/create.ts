import { randomUUID } from 'node:crypto';
import { hash } from '@node-rs/bcrypt';
import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { rfc3339 } from '../../../../core/ids.ts';
import { assertMayManage } from '../../access.ts';
import type { Scope } from '../../repository.ts';
import { commonErrors, createKeyBody, createdKey, errorResponse, type ScopeInput } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

/** bcrypt cost for secrets (README: Keys): ~50 ms per hash, off the event loop. */
export const SECRET_HASH_COST = 10;

/** Every scope stored and returned with both members, `[]`/`{}` standing for "any". */
export function normaliseScopes(scopes: readonly ScopeInput[] | undefined): Scope[] {
  return (scopes ?? []).map((scope) => ({
    projects: [...(scope.projects ?? [])],
    // fromEntries defines own properties, so a host named `__proto__` stays an ordinary entry.
    host_rules: Object.fromEntries(Object.entries((scope.host_rules ?? {}) as Record<string, string>)),
  }));
}

export const createKeySchema = {
  tags: ['apikeys'],
  operationId: 'createApiKey',
  security: SIGNED_IN,
  summary: 'Create an API key; the secret is returned only here',
  body: createKeyBody,
  response: { 201: createdKey, ...commonErrors, 403: errorResponse },
};

/** `POST /v0/apikeys` (README: Keys): a new key and its secret, shown only in this response. */
export function registerCreateKey(app: ServiceApp, { repository }: RouteDeps): void {
  app.post('/v0/apikeys', { schema: createKeySchema }, async (request, reply) => {
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
  });
}
