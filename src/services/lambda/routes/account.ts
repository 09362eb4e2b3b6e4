import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { requireIdentity } from '../../../core/identity.ts';
import { errors, meObject, ongoingItem } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';
import { openApiDocument, SIGNED_IN } from '../../../core/openapi.ts';

const tags = ['account'];
const security = SIGNED_IN;

export const ongoingSchema = {
  tags,
  security,
  summary: "The caller's running invocations",
  response: { 200: Type.Array(ongoingItem), ...errors(401) },
};
export const meSchema = {
  tags,
  security,
  summary: "The caller's user record",
  response: { 200: meObject, ...errors(401) },
};

/** `/ongoing`, `/me` and `/openapi` with their `/api/v0` aliases (README: Routes). */
export function registerAccount(app: ServiceApp, { invoker }: RouteDeps): void {
  // Every instance's running invocations of the caller's lambdas (README: Ongoing invocations).
  const ongoing = async (request: FastifyRequest) => invoker.ongoing.list(requireIdentity(request).user.id);
  app.get('/ongoing', { schema: { ...ongoingSchema, operationId: 'listOngoingAtRoot' } }, ongoing);
  app.get('/api/v0/ongoing', { schema: { ...ongoingSchema, operationId: 'listOngoing' } }, ongoing);

  // Only what the gateway's identity carries; members it does not know are left out.
  const me = async (request: FastifyRequest) => {
    const { user } = requireIdentity(request);
    return {
      id: user.id,
      ...(user.email ? { email: user.email } : {}),
      ...(user.nick ? { nick: user.nick } : {}),
      ...(user.picture ? { picture: user.picture } : {}),
    };
  };
  app.get('/me', { schema: { ...meSchema, operationId: 'getMeAtRoot' } }, me);
  app.get('/api/v0/me', { schema: { ...meSchema, operationId: 'getMe' } }, me);

  // The OpenAPI document (README: OpenAPI): public at /openapi and /openapi.json (what tools and
  // the other services use), with identity at /api/v0/openapi.
  app.get('/openapi', { schema: { hide: true } }, async (request) => openApiDocument(app, request));
  app.get('/openapi.json', { schema: { hide: true } }, async (request) => openApiDocument(app, request));
  app.get('/api/v0/openapi', { schema: { hide: true } }, async (request) => {
    requireIdentity(request);
    return openApiDocument(app, request);
  });
}
