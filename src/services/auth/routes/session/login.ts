import type { ServiceApp } from '../../../../core/app.ts';
import { normaliseEmail, verifyPassword } from '../../credentials.ts';
import { AuthErrors } from '../../errors.ts';
import { startSession } from '../../login.ts';
import { findUserByEmail } from '../../repository.ts';
import { errorResponse, loginBody, loginResponseSchema } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { ANONYMOUS } from '../../../../core/openapi.ts';

export const loginSchema = {
  tags: ['sessions'],
  operationId: 'logIn',
  security: ANONYMOUS,
  summary: 'Log in with email and password; sets the stratus_session cookie',
  body: loginBody,
  response: { 200: loginResponseSchema, 400: errorResponse, 401: errorResponse, 429: errorResponse },
};

/** `POST /v0/login` (README: Login failures, Throttling of failed logins, Sessions). */
export function registerLogin(app: ServiceApp, { connection, settings, throttle }: RouteDeps): void {
  app.post('/v0/login', { schema: loginSchema }, async (request, reply) => {
    const email = normaliseEmail(request.body.email);
    await throttle.attempt(email);
    const user = await findUserByEmail(connection, email);
    // Unknown users and users without a password are checked against a dummy hash, so all three
    // failures take as long as one another and answer alike.
    const valid = await verifyPassword(request.body.password, user?.passwordHash);
    if (!user || !valid) throw AuthErrors.invalidCredentials();
    await throttle.succeeded(email);
    return startSession(request, reply, connection, user, settings);
  });
}
