import type { Settings } from '../../../config.ts';
import type { ServiceApp } from '../../../core/app.ts';
import { forbidden } from '../../../core/errors.ts';
import type { SqlConnection } from '../../../store/db.ts';
import { checkEmail } from '../credentials.ts';
import { loginResponseSchema, startSession } from '../login.ts';
import { createUser } from '../repository.ts';
import { errorResponse, signupBody } from '../schemas.ts';

export interface SignupRouteDeps {
  connection: SqlConnection;
  settings: Pick<Settings, 'domain' | 'cookieSecure' | 'signup'>;
}

/** `POST /v0/signup` (gateway.md §5.4): self-service accounts when `SIGNUP=open`. */
export function registerSignupRoute(app: ServiceApp, { connection, settings }: SignupRouteDeps): void {
  app.post(
    '/v0/signup',
    {
      schema: {
        tags: ['users'],
        summary: 'Create an account and log in (only when SIGNUP=open)',
        body: signupBody,
        response: { 201: loginResponseSchema, 400: errorResponse, 403: errorResponse, 409: errorResponse },
      },
      // Closed signup answers 403 before the body is even parsed: nothing else is revealed.
      onRequest: async () => {
        if (settings.signup !== 'open') throw forbidden('signup is closed; ask an administrator for an account');
      },
    },
    async (request, reply) => {
      const email = checkEmail(request.body.email);
      const user = await createUser(connection, { email, password: request.body.password, nick: request.body.nick });
      const body = await startSession(reply, connection, user, settings);
      return reply.code(201).send(body);
    },
  );
}
