import type { ServiceApp } from '../../../core/app.ts';
import { checkEmail } from '../credentials.ts';
import { AuthErrors } from '../errors.ts';
import { startSession } from '../login.ts';
import { createUser } from '../repository.ts';
import { errorResponse, loginResponseSchema, signupBody } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';
import { ANONYMOUS } from '../../../core/openapi.ts';

export const signupSchema = {
  tags: ['users'],
  operationId: 'signUp',
  security: ANONYMOUS,
  summary: 'Create an account and log in (only when SIGNUP=open)',
  body: signupBody,
  response: { 201: loginResponseSchema, 400: errorResponse, 403: errorResponse, 409: errorResponse },
};

/** `POST /v0/signup` (README: Signup): self-service accounts when `SIGNUP=open`. */
export function registerSignup(app: ServiceApp, { connection, settings }: RouteDeps): void {
  app.post(
    '/v0/signup',
    {
      schema: signupSchema,
      // Closed signup answers 403 before the body is even parsed: nothing else is revealed.
      onRequest: async () => {
        if (settings.signup !== 'open') throw AuthErrors.signupClosed();
      },
    },
    async (request, reply) => {
      const email = checkEmail(request.body.email);
      const user = await createUser(connection, { email, password: request.body.password, nick: request.body.nick });
      const body = await startSession(request, reply, connection, user, settings);
      return reply.code(201).send(body);
    },
  );
}
