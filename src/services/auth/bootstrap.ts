import type { FastifyBaseLogger } from 'fastify';
import { SettingsError, type Settings } from '../../config.ts';
import { HttpError } from '../../core/errors.ts';
import type { SqlConnection } from '../../store/db.ts';
import { checkEmail, checkPassword } from './credentials.ts';
import { createUser, findUserByEmail, type User } from './repository.ts';

/**
 * Creates the bootstrap admin from `ADMIN_EMAIL` + `ADMIN_PASSWORD` when both are set and no user
 * has that email yet. An existing user is left exactly as it is (a changed `ADMIN_PASSWORD` does not
 * reset a password). Returns the created user, or null when nothing was created. A bad email or
 * password is a SettingsError, so the platform refuses to start rather than run with it.
 */
export async function ensureBootstrapAdmin(
  connection: SqlConnection,
  settings: Pick<Settings, 'adminEmail' | 'adminPassword'>,
  logger: FastifyBaseLogger,
): Promise<User | null> {
  const { adminEmail, adminPassword } = settings;
  if (adminEmail === undefined && adminPassword === undefined) return null;
  if (adminEmail === undefined || adminPassword === undefined) {
    logger.warn(
      `no bootstrap admin: set both ADMIN_EMAIL and ADMIN_PASSWORD (only ${adminEmail === undefined ? 'ADMIN_PASSWORD' : 'ADMIN_EMAIL'} is set)`,
    );
    return null;
  }
  let email: string;
  try {
    email = checkEmail(adminEmail, 'ADMIN_EMAIL');
    checkPassword(adminPassword, 'ADMIN_PASSWORD');
  } catch (error) {
    if (error instanceof HttpError) throw new SettingsError(error.message);
    throw error;
  }
  if (await findUserByEmail(connection, email)) return null;
  try {
    const user = await createUser(connection, { email, password: adminPassword });
    logger.info({ userId: user.id, email: user.email }, 'bootstrap admin user created');
    return user;
  } catch (error) {
    // Another instance starting at the same time created it first.
    if (error instanceof HttpError && error.status === 409) return null;
    throw error;
  }
}
