import type { IncomingMessage } from 'node:http';
import type { Settings } from '../config.ts';
import type { Identity } from '../core/identity.ts';
import type { SqlConnection } from '../store/db.ts';
import { extendSession, findSessionByToken, type User } from '../services/auth/repository.ts';
import { readSessionCookie, sessionCookie } from '../services/auth/cookies.ts';
import { resolveUser, type OidcProviders } from '../services/auth/oidc.ts';
import { ApiKeyVerifier, matchScopes, type VerifiedKey } from './keys.ts';
import { cookieAllowed } from './origins.ts';

/** Which presented credential produced the identity; the gateway strips it before forwarding. */
export type Credential = 'api_key' | 'basic' | 'bearer_session' | 'bearer_jwt' | 'cookie';

export type AuthOutcome =
  | { kind: 'anonymous' }
  | { kind: 'authenticated'; identity: Identity; credential: Credential; setCookie?: string; identityJson?: string }
  /** A credential the gateway recognises failed: 401 whatever the route's policy. */
  | { kind: 'rejected'; message: string };

export interface RequestScope {
  /** Host name without port, lower case. */
  host: string;
  project: { id: string; slug: string } | null;
}

/** A session's expiry slides at most this often (each extension is a write and a new cookie). */
const SESSION_REFRESH_MS = 60 * 60 * 1000;

const ANONYMOUS: AuthOutcome = { kind: 'anonymous' };

function userRef(user: User): Identity['user'] {
  const ref: Identity['user'] = { id: user.id };
  if (user.nick) ref.nick = user.nick;
  if (user.email) ref.email = user.email;
  if (user.picture) ref.picture = user.picture;
  return ref;
}

/**
 * The gateway's authentication step (gateway.md §3): API key headers, then `Authorization`
 * (Basic key:secret, Bearer session token or provider JWT), then the session cookie; the first
 * that authenticates wins. Unrecognised credentials leave the request anonymous (the route policy
 * decides); recognised ones that fail verification reject it.
 */
export class Authenticator {
  constructor(
    private readonly connection: SqlConnection,
    private readonly keys: ApiKeyVerifier,
    private readonly providers: OidcProviders,
    private readonly settings: Pick<Settings, 'domain' | 'cookieSecure' | 'signup'>,
  ) {}

  /** Cheap test for the common anonymous request: no header that could carry a credential. */
  static hasCredentials(req: IncomingMessage): boolean {
    const h = req.headers;
    return h['api-key'] !== undefined || h.authorization !== undefined || (h.cookie !== undefined && h.cookie.includes('stratus_session'));
  }

  /**
   * Synchronous when the request carries an API key whose check is cached (the common case for
   * machine traffic), so that path costs no promise chain; otherwise a promise.
   */
  authenticate(req: IncomingMessage, scope: RequestScope): AuthOutcome | Promise<AuthOutcome> {
    const apiKey = single(req.headers['api-key']);
    const apiSecret = single(req.headers['api-secret']);
    let hash: string | undefined;
    if (apiKey && apiSecret) {
      hash = ApiKeyVerifier.pairHash(apiKey, apiSecret);
      const cached = this.keys.cached(hash);
      if (cached) return this.keyOutcome(cached, scope, 'api_key');
    }
    return this.authenticateSlowly(req, scope, apiKey, apiSecret, hash);
  }

  private async authenticateSlowly(req: IncomingMessage, scope: RequestScope, apiKey: string | undefined, apiSecret: string | undefined, hash: string | undefined): Promise<AuthOutcome> {
    const headers = req.headers;
    if (apiKey && apiSecret) {
      const outcome = await this.withKey(apiKey, apiSecret, scope, 'api_key', hash);
      if (outcome) return outcome;
    }

    const authorization = headers.authorization;
    if (authorization) {
      const space = authorization.indexOf(' ');
      const schemeName = (space > 0 ? authorization.slice(0, space) : authorization).toLowerCase();
      const value = space > 0 ? authorization.slice(space + 1).trim() : '';
      if (schemeName === 'basic' && value) {
        const outcome = await this.withBasic(value, scope);
        if (outcome) return outcome;
      } else if (schemeName === 'bearer' && value) {
        const outcome = await this.withBearer(value);
        if (outcome) return outcome;
      }
    }

    const token = readSessionCookie(headers.cookie);
    if (token && cookieAllowed(req, this.settings.domain)) {
      const outcome = await this.withSession(token, 'cookie');
      if (outcome) return outcome;
    }
    return ANONYMOUS;
  }

  /** null: the key is unknown (the caller goes on to other credentials). */
  private async withKey(key: string, secret: string, scope: RequestScope, credential: 'api_key' | 'basic', hash?: string): Promise<AuthOutcome | null> {
    const check = await this.keys.check(key, secret, hash);
    if (check.status === 'unknown') return null;
    if (check.status === 'wrong_secret') return { kind: 'rejected', message: 'invalid API key secret' };
    return this.keyOutcome(check.key, scope, credential);
  }

  /** A verified key: its scopes decide (apikeys.md §2.3); the identity is the key's owner. */
  private keyOutcome(verified: VerifiedKey, scope: RequestScope, credential: 'api_key' | 'basic'): AuthOutcome {
    const match = matchScopes(verified.scopes, scope.host, scope.project?.id ?? null);
    if (!match.ok) return { kind: 'rejected', message: 'the API key is not valid for this host or project' };
    const identity: Identity = {
      user: verified.user,
      auth: match.hostMetadata !== undefined ? { method: 'api_key', key: verified.key, host_metadata: match.hostMetadata } : { method: 'api_key', key: verified.key },
    };
    if (scope.project) {
      identity.project = scope.project;
      return { kind: 'authenticated', identity, credential };
    }
    // The same key outside projects without host metadata always has the same identity JSON.
    if (match.hostMetadata !== undefined) return { kind: 'authenticated', identity, credential };
    verified.plainIdentityJson ??= JSON.stringify(identity);
    return { kind: 'authenticated', identity, credential, identityJson: verified.plainIdentityJson };
  }

  /** Basic credentials that fail for any reason leave the request anonymous (gateway.md §3.2). */
  private async withBasic(encoded: string, scope: RequestScope): Promise<AuthOutcome | null> {
    const decoded = Buffer.from(encoded, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon <= 0) return null;
    const outcome = await this.withKey(decoded.slice(0, colon), decoded.slice(colon + 1), scope, 'basic');
    return outcome?.kind === 'authenticated' ? outcome : null;
  }

  private async withBearer(token: string): Promise<AuthOutcome | null> {
    if (this.providers.providerForToken(token)) {
      let verified;
      try {
        verified = await this.providers.verifyIdToken(token);
      } catch {
        return { kind: 'rejected', message: 'invalid bearer token' };
      }
      const user = await resolveUser(this.connection, verified.provider, verified.claims, this.settings);
      if (!user) return { kind: 'rejected', message: 'no account is linked to this identity' };
      return { kind: 'authenticated', identity: { user: userRef(user), auth: { method: 'bearer' } }, credential: 'bearer_jwt' };
    }
    return this.withSession(token, 'bearer_session');
  }

  private async withSession(token: string, credential: 'cookie' | 'bearer_session'): Promise<AuthOutcome | null> {
    const found = await findSessionByToken(this.connection, token);
    if (!found) return null;
    const identity: Identity = {
      user: userRef(found.user),
      session: { id: found.session.id },
      auth: { method: credential === 'cookie' ? 'session' : 'bearer' },
    };
    const now = Date.now();
    let setCookie: string | undefined;
    if (now - found.session.lastSeenAt >= SESSION_REFRESH_MS) {
      await extendSession(this.connection, found.session.id, now);
      if (credential === 'cookie') setCookie = sessionCookie(token, this.settings);
    }
    return { kind: 'authenticated', identity, credential, ...(setCookie ? { setCookie } : {}) };
  }

}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value || undefined;
}
