import type { ServiceApp } from '../../../../core/app.ts';
import { startSession } from '../../login.ts';
import type { User } from '../../repository.ts';
import { errorResponse, loginResponseSchema, providerParams, ssoTokenBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { httpError, providerNamed, userFor } from './common.ts';
import { ANONYMOUS } from '../../../../core/openapi.ts';

export const ssoTokenSchema = {
  tags: ['single sign-on'],
  operationId: 'signInWithIdToken',
  security: ANONYMOUS,
  summary: 'Sign in with an ID token the caller obtained from the provider itself; sets the stratus_session cookie',
  params: providerParams,
  body: ssoTokenBody,
  response: {
    200: loginResponseSchema,
    400: errorResponse,
    401: errorResponse,
    403: errorResponse,
    404: errorResponse,
    502: errorResponse,
  },
};

/** `POST /v0/sso/{provider}/token {id_token}` (README: Single sign-on): for a console that ran the flow itself. */
export function registerSsoToken(app: ServiceApp, deps: RouteDeps): void {
  const { connection, settings, providers } = deps;

  app.post(
    '/v0/sso/:provider/token',
    {
      // Unknown providers answer 404 before the body is looked at.
      onRequest: async (request) => {
        providerNamed(deps, (request.params as { provider: string }).provider);
      },
      schema: ssoTokenSchema,
    },
    async (request, reply) => {
      const provider = providerNamed(deps, request.params.provider);
      let user: User;
      try {
        const { claims } = await providers.verifyIdToken(request.body.id_token, { provider: provider.name });
        user = await userFor(deps, provider, claims);
      } catch (caught) {
        throw httpError(deps, caught, provider.name);
      }
      return startSession(request, reply, connection, user, settings);
    },
  );
}
