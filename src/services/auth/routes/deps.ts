import type { FastifyBaseLogger } from 'fastify';
import type { Settings } from '../../../config.ts';
import type { SqlConnection } from '../../../store/db.ts';
import type { OidcProviders } from '../oidc.ts';
import type { LoginThrottle } from '../throttle.ts';

/** What every route of the auth service is given by index.ts. */
export interface RouteDeps {
  connection: SqlConnection;
  settings: Settings;
  logger: FastifyBaseLogger;
  /** Failed-login throttling, shared by every instance through the database. */
  throttle: LoginThrottle;
  /** The configured OpenID Connect providers, with their discovery documents and key sets cached. */
  providers: OidcProviders;
  /** The Stratus version, answered by `GET /version`. */
  version: string;
}
