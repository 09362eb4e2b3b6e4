import type { IncomingMessage } from 'node:http';
import type { Settings } from '../config.ts';
import type { Identity } from '../core/identity.ts';
import type { SqlConnection } from '../store/db.ts';
import {
  extendSession,
  findSessionByToken,
  readSessionCookie,
  resolveUser,
  sessionCookie,
  type OidcProviders,
  type User,
} from '../services/auth/index.ts';
import { TrustedProxies } from './client-address.ts';
import { CredentialGuard, DEFAULT_GUARD, SharedFailureCounts } from './guard.ts';
import { ApiKeyVerifier, matchScopes, type VerifiedKey } from './keys.ts';
import { cookieAllowed } from './origins.ts';

/** Which presented credential produced the identity; the gateway strips it before forwarding. */
export type Credential = 'api_key' | 'basic' | 'bearer_session' | 'bearer_jwt' | 'cookie';

export type AuthOutcome =
  /** `strip`: credential headers to remove before forwarding (a platform key that failed as Basic). */
  | { kind: 'anonymous'; strip?: readonly string[] }
  | {
      kind: 'authenticated';
      identity: Identity;
      credential: Credential;
      setCookie?: string;
      identityJson?: string;
      /** An API key bound to exactly one project (every scope names it): that project's id. */
      keyProject?: string;
      /** Further credential headers to remove: a platform bearer token sent beside an API key. */
      strip?: readonly string[];
    }
  /** A credential the gateway recognises failed: 401 whatever the route's policy. */
  | { kind: 'rejected'; message: string }
  /** Too many failed or concurrent credential checks from this address or for this key: 429. */
  | { kind: 'limited'; retryAfterSeconds: number };

export interface RequestScope {
  /** Host name without port, lower case. */
  host: string;
  project: { id: string; slug: string } | null;
  /**
   * The key-value host: a key bound to one project is valid there for that project (its namespace,
   * the gateway README), although the request comes through no project host.
   */
  keyProjectApplies?: boolean;
}

/** A session's expiry slides at most this often (each extension is a write and a new cookie). */
const SESSION_REFRESH_MS = 60 * 60 * 1000;

const ANONYMOUS: AuthOutcome = { kind: 'anonymous' };
const STRIP_AUTHORIZATION: AuthOutcome = { kind: 'anonymous', strip: ['authorization'] };
/** One message for a wrong secret and (on `require` routes) an unknown key: neither tells which. */
export const INVALID_KEY_MESSAGE = 'invalid API key or secret';

function userRef(user: User): Identity['user'] {
  const ref: Identity['user'] = { id: user.id };
  if (user.nick) ref.nick = user.nick;
  if (user.email) ref.email = user.email;
  if (user.picture) ref.picture = user.picture;
  return ref;
}

/**
 * The gateway's authentication step (README: Several credential forms): API key headers, then
 * `Authorization` (Basic key:secret, Bearer session token or provider JWT), then the session
 * cookie; the first that authenticates wins. Unrecognised credentials leave the request anonymous
 * (the route policy decides); recognised ones that fail verification reject it.
 */
export class Authenticator {
  constructor(
    private readonly connection: SqlConnection,
    private readonly keys: ApiKeyVerifier,
    private readonly providers: OidcProviders,
    private readonly settings: Pick<Settings, 'domain' | 'cookieSecure' | 'signup' | 'corsOrigins'> & {
      readonly trustedProxies?: readonly string[];
    },
    // Failure counts in the database, shared by every instance (guard.ts).
    private readonly guard: CredentialGuard = new CredentialGuard(
      DEFAULT_GUARD,
      Date.now,
      new SharedFailureCounts(connection),
    ),
  ) {
    this.proxies = new TrustedProxies(settings.trustedProxies);
  }

  /** Whose failures the guard counts: the client behind a trusted proxy, else the connection's address. */
  private readonly proxies: TrustedProxies;

  /** Cheap test for the common anonymous request: no header that could carry a credential. */
  static hasCredentials(req: IncomingMessage): boolean {
    const h = req.headers;
    return (
      h['api-key'] !== undefined ||
      h.authorization !== undefined ||
      (h.cookie !== undefined && h.cookie.includes('stratus_session'))
    );
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
      // Another service's key (a docdb database key on every call to it) with no other credential:
      // anonymous at once, as the lookup just made for it answered.
      if (this.keys.knownUnknown(apiKey) && req.headers.authorization === undefined && req.headers.cookie === undefined)
        return ANONYMOUS;
      hash = ApiKeyVerifier.pairHash(apiKey, apiSecret);
      const cached = this.keys.cached(hash);
      if (cached) {
        const outcome = this.keyOutcome(cached, scope, 'api_key');
        return outcome.kind === 'authenticated' && req.headers.authorization !== undefined
          ? this.withoutPlatformBearer(req, outcome)
          : outcome;
      }
    }
    return this.authenticateSlowly(req, scope, apiKey, apiSecret, hash);
  }

  private async authenticateSlowly(
    req: IncomingMessage,
    scope: RequestScope,
    apiKey: string | undefined,
    apiSecret: string | undefined,
    hash: string | undefined,
  ): Promise<AuthOutcome> {
    const headers = req.headers;
    const address = this.proxies.clientAddress(req);
    if (apiKey && apiSecret) {
      const outcome = await this.withKey(apiKey, apiSecret, scope, 'api_key', address, hash);
      if (outcome?.kind === 'authenticated' && headers.authorization !== undefined)
        return this.withoutPlatformBearer(req, outcome);
      if (outcome) return outcome;
    }

    const authorization = headers.authorization;
    if (authorization) {
      const space = authorization.indexOf(' ');
      const schemeName = (space > 0 ? authorization.slice(0, space) : authorization).toLowerCase();
      const value = space > 0 ? authorization.slice(space + 1).trim() : '';
      if (schemeName === 'basic' && value) {
        const outcome = await this.withBasic(value, scope, address);
        if (outcome) return outcome;
      } else if (schemeName === 'bearer' && value) {
        const outcome = await this.withBearer(value);
        if (outcome) return outcome;
      }
    }

    const token = readSessionCookie(headers.cookie);
    if (token && cookieAllowed(req, this.settings.domain, this.settings.corsOrigins)) {
      const outcome = await this.withSession(token, 'cookie');
      if (outcome) return outcome;
    }
    return ANONYMOUS;
  }

  /**
   * An API key won, but `Authorization` may still carry a platform credential (a session token or
   * a provider's ID token): it is removed too, so no backend or lambda receives it. Other bearer
   * values (a scheduler key) pass.
   */
  private async withoutPlatformBearer(
    req: IncomingMessage,
    outcome: Extract<AuthOutcome, { kind: 'authenticated' }>,
  ): Promise<AuthOutcome> {
    const authorization = req.headers.authorization ?? '';
    const space = authorization.indexOf(' ');
    if (space <= 0 || authorization.slice(0, space).toLowerCase() !== 'bearer') return outcome;
    const token = authorization.slice(space + 1).trim();
    if (token === '') return outcome;
    const platform =
      this.providers.providerForToken(token) !== null || (await findSessionByToken(this.connection, token)) !== null;
    return platform ? { ...outcome, strip: ['authorization'] } : outcome;
  }

  /**
   * null: the key is unknown (the caller goes on to other credentials; backends have keys of their
   * own). Uncached checks pass the guard first, which bounds the bcrypt work per address and key.
   */
  private async withKey(
    key: string,
    secret: string,
    scope: RequestScope,
    credential: 'api_key' | 'basic',
    address: string,
    hash = ApiKeyVerifier.pairHash(key, secret),
  ): Promise<AuthOutcome | null> {
    // Looked up and not found a moment ago: unknown again, without a lookup or the guard's read.
    if (this.keys.knownUnknown(key)) return null;
    // Where other instances revoke too, a cached success is confirmed by a notifier fence.
    const confirmed = await this.keys.confirmed(hash);
    if (confirmed) return this.keyOutcome(confirmed, scope, credential);
    // A burst of one pair shares one verification (keys.ts): joining it needs no admission.
    let check = await this.keys.pending(hash);
    if (check === undefined) {
      // Failures counted by every instance first (a shared read); then this instance's cap.
      const limited = await this.guard.limitedEverywhere(address, key);
      if (limited !== undefined) return { kind: 'limited', retryAfterSeconds: limited };
      // The same pair may have started its check meanwhile: joining it needs no admission.
      const started = this.keys.pending(hash);
      if (started !== undefined) check = await started;
      else {
        const admission = this.guard.admit(address, key);
        if (!admission.ok) return { kind: 'limited', retryAfterSeconds: admission.retryAfterSeconds };
        try {
          check = await this.keys.check(key, secret, hash);
        } finally {
          admission.release();
        }
      }
    }
    if (check.status === 'unknown') return null;
    if (check.status === 'wrong_secret') {
      await this.guard.fail(address, key);
      return { kind: 'rejected', message: INVALID_KEY_MESSAGE };
    }
    return this.keyOutcome(check.key, scope, credential);
  }

  /** A verified key: its scopes decide (src/services/apikeys/README.md, Scopes); the identity is the key's owner. */
  private keyOutcome(verified: VerifiedKey, scope: RequestScope, credential: 'api_key' | 'basic'): AuthOutcome {
    const keyProject = boundProject(verified);
    const match = matchScopes(
      verified.scopes,
      scope.host,
      scope.project?.id ?? (scope.keyProjectApplies ? (keyProject ?? null) : null),
    );
    if (!match.ok) return { kind: 'rejected', message: 'the API key is not valid for this host or project' };
    const identity: Identity = {
      user: verified.user,
      auth:
        match.hostMetadata !== undefined
          ? { method: 'api_key', key: verified.key, host_metadata: match.hostMetadata }
          : { method: 'api_key', key: verified.key },
    };
    const bound = keyProject === undefined ? {} : { keyProject };
    if (scope.project) {
      identity.project = scope.project;
      return { kind: 'authenticated', identity, credential, ...bound };
    }
    // The same key outside projects without host metadata always has the same identity JSON.
    if (match.hostMetadata !== undefined) return { kind: 'authenticated', identity, credential, ...bound };
    verified.plainIdentityJson ??= JSON.stringify(identity);
    return { kind: 'authenticated', identity, credential, identityJson: verified.plainIdentityJson, ...bound };
  }

  /**
   * Basic credentials that fail for any reason leave the request anonymous (README: Basic
   * credentials that fail), so container clients get the registry's own challenge. When they name
   * a platform key (a wrong secret, or a key outside its scopes) the header is removed: no backend,
   * least of all another user's lambda, may receive a platform key and secret.
   */
  private async withBasic(encoded: string, scope: RequestScope, address: string): Promise<AuthOutcome | null> {
    const decoded = Buffer.from(encoded, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon <= 0) return null;
    const outcome = await this.withKey(decoded.slice(0, colon), decoded.slice(colon + 1), scope, 'basic', address);
    if (outcome === null || outcome.kind === 'authenticated' || outcome.kind === 'limited') return outcome;
    return STRIP_AUTHORIZATION;
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
      return {
        kind: 'authenticated',
        identity: { user: userRef(user), auth: { method: 'bearer' } },
        credential: 'bearer_jwt',
      };
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

/** The one project a key is bound to: every scope lists projects, and together they name one. */
function boundProject(verified: VerifiedKey): string | undefined {
  if (verified.scopes.length === 0 || verified.scopes.some((scope) => scope.projects.length === 0)) return undefined;
  const projects = new Set(verified.scopes.flatMap((scope) => scope.projects));
  return projects.size === 1 ? [...projects][0] : undefined;
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value || undefined;
}
