/**
 * OpenID Connect relying-party support (README: Single sign-on): provider discovery, ID-token
 * (and provider bearer JWT) verification against the provider's JWKS, and linking a verified
 * identity to a Stratus user.
 *
 * Used by the auth service's single sign-on routes and by the gateway, which validates
 * `Authorization: Bearer <JWT>` with `providerForToken` + `verifyIdToken`.
 *
 * Nothing here logs or repeats a token, a code or a client secret in an error message.
 */
import {
  createRemoteJWKSet,
  customFetch,
  decodeJwt,
  decodeProtectedHeader,
  errors as joseErrors,
  jwtVerify,
  type JWTPayload,
  type JWSHeaderParameters,
  type FlattenedJWSInput,
  type CryptoKey,
} from 'jose';
import type { AuthProviderSettings, Settings } from '../../config.ts';
import { HttpError } from '../../core/errors.ts';
import type { SqlConnection } from '../../store/db.ts';
import { checkEmail } from './credentials.ts';
import {
  createUser,
  findUserByEmail,
  findUserById,
  findUserByIdentity,
  linkIdentity,
  updateUserProfile,
  type User,
} from './repository.ts';

export type { JWTPayload } from 'jose';

/** A configured provider: `name` (the `{provider}` path segment), `issuer`, `clientId`, `clientSecret`. */
export type ProviderSettings = AuthProviderSettings;

/** The members of `<issuer>/.well-known/openid-configuration` that Stratus uses. */
export interface DiscoveryDocument {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
  userinfo_endpoint?: string;
  token_endpoint_auth_methods_supported?: string[];
  code_challenge_methods_supported?: string[];
  id_token_signing_alg_values_supported?: string[];
}

/** The token is not acceptable (bad signature, claims, algorithm, issuer, nonce…). Maps to 401. */
export class InvalidTokenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidTokenError';
  }
}

/** The identity provider could not be reached or answered nonsense (discovery, JWKS, token endpoint). Maps to 502. */
export class ProviderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProviderError';
  }
}

/** No provider of that name is configured. Maps to 404. */
export class UnknownProviderError extends Error {
  /** The name asked for. */
  readonly provider: string;

  constructor(name: string) {
    super(`unknown single sign-on provider '${name.slice(0, 100)}'`);
    this.name = 'UnknownProviderError';
    this.provider = name;
  }
}

/** Asymmetric JWS algorithms accepted for ID tokens and provider JWTs; `none` and `HS*` never are. */
export const ALLOWED_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;

/** Clock skew allowed on `exp`, `nbf` and `iat` (README: Single sign-on, token checks). */
export const CLOCK_TOLERANCE_SECONDS = 60;

/** How long a discovery document is reused before it is fetched again. */
const DISCOVERY_TTL_MS = 60 * 60 * 1000;
/** Timeout for each call to a provider (discovery, JWKS, token endpoint). */
export const PROVIDER_TIMEOUT_MS = 10_000;

type FetchLike = typeof fetch;

export interface OidcProvidersOptions {
  /** Replaces the global fetch for discovery, JWKS and token requests (tests). */
  fetch?: FetchLike;
  /** Per-request timeout in milliseconds (default 10 s). */
  timeoutMs?: number;
}

export interface VerifyOptions {
  /** Only this provider's issuer and client id are accepted (the SSO routes); default: any configured issuer. */
  provider?: string;
  /** The token's `nonce` claim must equal this (the code flow's callback). */
  nonce?: string;
}

export interface VerifiedToken {
  provider: ProviderSettings;
  claims: JWTPayload;
}

type KeyGetter = (header: JWSHeaderParameters, token: FlattenedJWSInput) => Promise<CryptoKey>;

const JWT_PART = /^[A-Za-z0-9_-]+$/;

/** application/x-www-form-urlencoded encoding of one value (spaces as `+`). */
const formEncode = (value: string) => new URLSearchParams({ v: value }).toString().slice(2);

/** Issuers are compared exactly, except that one trailing slash is not significant. */
function sameIssuer(a: string, b: string): boolean {
  return a.replace(/\/$/, '') === b.replace(/\/$/, '');
}

/** The claims of a three-part JWS compact token, not verified; null when it is not one. */
function peekClaims(token: string): JWTPayload | null {
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every((part, i) => JWT_PART.test(part) || (i === 2 && part === ''))) return null;
  try {
    return decodeJwt(token);
  } catch {
    return null;
  }
}

function audiences(claims: JWTPayload): string[] {
  if (typeof claims.aud === 'string') return [claims.aud];
  if (Array.isArray(claims.aud)) return claims.aud.filter((a): a is string => typeof a === 'string');
  return [];
}

function isHttpUrl(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:';
  } catch {
    return false;
  }
}

/** A short, secret-free description of a failed call. */
function describe(error: unknown): string {
  if (error instanceof Error) {
    if (error.name === 'TimeoutError' || error.name === 'AbortError') return 'timed out';
    const cause = (error as { cause?: { code?: unknown } }).cause;
    if (cause && typeof cause.code === 'string') return cause.code;
    return error.message.slice(0, 200);
  }
  return 'unknown error';
}

/**
 * The configured OpenID Connect providers, with their discovery documents and key sets cached
 * per process. One instance can serve the SSO routes and the gateway.
 */
export class OidcProviders {
  readonly #providers: readonly ProviderSettings[];
  readonly #fetch: FetchLike;
  readonly #timeoutMs: number;
  readonly #discovery = new Map<string, { at: number; document: Promise<DiscoveryDocument> }>();
  readonly #jwks = new Map<string, { uri: string; getKey: KeyGetter }>();

  constructor(providers: readonly ProviderSettings[], options: OidcProvidersOptions = {}) {
    this.#providers = providers.map((p) => ({ ...p }));
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#timeoutMs = options.timeoutMs ?? PROVIDER_TIMEOUT_MS;
  }

  /** Every configured provider, in configuration order. */
  list(): readonly ProviderSettings[] {
    return this.#providers;
  }

  /** The provider of that name, or undefined. */
  get(name: string): ProviderSettings | undefined {
    return this.#providers.find((p) => p.name === name);
  }

  #require(name: string): ProviderSettings {
    const provider = this.get(name);
    if (!provider) throw new UnknownProviderError(name);
    return provider;
  }

  /** `fetch` with this instance's timeout; network failures become ProviderError. */
  async #request(url: string, init: RequestInit, what: string): Promise<Response> {
    try {
      return await this.#fetch(url, { ...init, redirect: 'manual', signal: AbortSignal.timeout(this.#timeoutMs) });
    } catch (error) {
      throw new ProviderError(`${what} request failed: ${describe(error)}`);
    }
  }

  /**
   * The provider's discovery document (`<issuer>/.well-known/openid-configuration`), fetched once
   * and reused for an hour. Its `issuer` must equal the configured one. A failure is not cached.
   * Throws UnknownProviderError or ProviderError.
   */
  async discover(name: string): Promise<DiscoveryDocument> {
    const provider = this.#require(name);
    const cached = this.#discovery.get(name);
    if (cached && Date.now() - cached.at < DISCOVERY_TTL_MS) return cached.document;
    const document = this.#fetchDiscovery(provider);
    const entry = { at: Date.now(), document };
    this.#discovery.set(name, entry);
    document.catch(() => {
      if (this.#discovery.get(name) === entry) this.#discovery.delete(name);
    });
    return document;
  }

  async #fetchDiscovery(provider: ProviderSettings): Promise<DiscoveryDocument> {
    const url = `${provider.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
    const response = await this.#request(
      url,
      { headers: { accept: 'application/json' } },
      `discovery for provider '${provider.name}'`,
    );
    if (response.status !== 200) {
      await response.body?.cancel().catch(() => {});
      throw new ProviderError(`discovery for provider '${provider.name}' answered ${response.status}`);
    }
    let body: unknown;
    try {
      body = await response.json();
    } catch {
      throw new ProviderError(`discovery for provider '${provider.name}' did not return JSON`);
    }
    const doc = body as Partial<Record<keyof DiscoveryDocument, unknown>> | null;
    if (typeof doc !== 'object' || doc === null)
      throw new ProviderError(`discovery for provider '${provider.name}' did not return an object`);
    if (typeof doc.issuer !== 'string' || !sameIssuer(doc.issuer, provider.issuer)) {
      throw new ProviderError(`discovery for provider '${provider.name}' names another issuer`);
    }
    for (const field of ['authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const) {
      if (!isHttpUrl(doc[field]))
        throw new ProviderError(`discovery for provider '${provider.name}' has no valid ${field}`);
    }
    const strings = (value: unknown): string[] | undefined =>
      Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : undefined;
    return {
      issuer: doc.issuer,
      authorization_endpoint: doc.authorization_endpoint as string,
      token_endpoint: doc.token_endpoint as string,
      jwks_uri: doc.jwks_uri as string,
      userinfo_endpoint: isHttpUrl(doc.userinfo_endpoint) ? doc.userinfo_endpoint : undefined,
      token_endpoint_auth_methods_supported: strings(doc.token_endpoint_auth_methods_supported),
      code_challenge_methods_supported: strings(doc.code_challenge_methods_supported),
      id_token_signing_alg_values_supported: strings(doc.id_token_signing_alg_values_supported),
    };
  }

  /**
   * The key resolver for a provider's JWKS (jose's remote set: cached for 10 minutes and
   * refetched when a token names an unknown `kid`, at most every 30 s). Fetch failures become
   * ProviderError; a token whose key is not in the set, InvalidTokenError.
   */
  async #keys(provider: ProviderSettings): Promise<KeyGetter> {
    const { jwks_uri: uri } = await this.discover(provider.name);
    const cached = this.#jwks.get(provider.name);
    if (cached && cached.uri === uri) return cached.getKey;
    const remote = createRemoteJWKSet(new URL(uri), {
      timeoutDuration: this.#timeoutMs,
      [customFetch]: (url, init) => this.#fetch(url, init),
    });
    const getKey: KeyGetter = async (header, token) => {
      try {
        return await remote(header, token);
      } catch (error) {
        if (error instanceof joseErrors.JWKSNoMatchingKey)
          throw new InvalidTokenError('no key of the provider matches the token');
        if (error instanceof joseErrors.JWKSMultipleMatchingKeys)
          throw new InvalidTokenError('several keys of the provider match the token; it must name its kid');
        if (
          error instanceof joseErrors.JOSEError &&
          error.code !== 'ERR_JOSE_GENERIC' &&
          !(error instanceof joseErrors.JWKSTimeout) &&
          !(error instanceof joseErrors.JWKSInvalid)
        ) {
          throw new InvalidTokenError(`the token's key cannot be used (${error.code})`);
        }
        throw new ProviderError(`key set of provider '${provider.name}' could not be fetched: ${describe(error)}`);
      }
    };
    this.#jwks.set(provider.name, { uri, getKey });
    return getKey;
  }

  /**
   * Exchanges an authorization code at the provider's token endpoint (grant `authorization_code`
   * with the PKCE verifier), authenticating with the client secret as the discovery document
   * allows: `client_secret_basic` (also when the document names no method, the OAuth default),
   * else `client_secret_post`. Returns the ID token. Throws ProviderError on any failure; the
   * provider's OAuth error code is kept in the message, its description and every secret are not.
   */
  async exchangeCode(
    name: string,
    input: { code: string; redirectUri: string; verifier: string },
  ): Promise<{ idToken: string }> {
    const provider = this.#require(name);
    const discovery = await this.discover(name);
    const methods = discovery.token_endpoint_auth_methods_supported ?? ['client_secret_basic'];
    const form = new URLSearchParams({
      grant_type: 'authorization_code',
      code: input.code,
      redirect_uri: input.redirectUri,
      code_verifier: input.verifier,
    });
    const headers: Record<string, string> = {
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    };
    if (methods.includes('client_secret_basic')) {
      // Both parts form-urlencoded before the Basic encoding (README: Single sign-on, flow; RFC 6749, section 2.3.1).
      const credentials = `${formEncode(provider.clientId)}:${formEncode(provider.clientSecret)}`;
      headers.authorization = `Basic ${Buffer.from(credentials, 'utf8').toString('base64')}`;
    } else if (methods.includes('client_secret_post')) {
      form.set('client_id', provider.clientId);
      form.set('client_secret', provider.clientSecret);
    } else {
      throw new ProviderError(
        `provider '${name}' supports neither client_secret_basic nor client_secret_post at its token endpoint`,
      );
    }
    const response = await this.#request(
      discovery.token_endpoint,
      { method: 'POST', headers, body: form.toString() },
      `token endpoint of provider '${name}'`,
    );
    let body: unknown;
    try {
      body = await response.json();
    } catch {
      body = undefined;
    }
    const fields = (typeof body === 'object' && body !== null ? body : {}) as { id_token?: unknown; error?: unknown };
    if (response.status !== 200) {
      const code = typeof fields.error === 'string' && /^[\w.-]{1,64}$/.test(fields.error) ? ` (${fields.error})` : '';
      throw new ProviderError(`token endpoint of provider '${name}' answered ${response.status}${code}`);
    }
    if (typeof fields.id_token !== 'string' || fields.id_token === '')
      throw new ProviderError(`token endpoint of provider '${name}' returned no id_token`);
    return { idToken: fields.id_token };
  }

  /**
   * The configured provider whose issuer equals the (unverified) `iss` of a three-part base64url
   * JWT, else null. Cheap and synchronous: the gateway uses it to tell "a JWT from a configured
   * issuer" (verify it; 401 when that fails) from "some other bearer value" (maybe a session token).
   * When several providers share an issuer, the one whose client id is in `aud` wins.
   */
  providerForToken(token: string): ProviderSettings | null {
    const claims = peekClaims(token);
    if (!claims || typeof claims.iss !== 'string') return null;
    const iss = claims.iss;
    const candidates = this.#providers.filter((p) => sameIssuer(p.issuer, iss));
    if (candidates.length === 0) return null;
    const aud = audiences(claims);
    return candidates.find((p) => aud.includes(p.clientId)) ?? candidates[0] ?? null;
  }

  /**
   * Verifies an ID token (or a provider-issued bearer JWT): `iss` is a configured issuer (the named
   * provider's when `options.provider` is given), the signature verifies against that issuer's JWKS
   * with an asymmetric algorithm (`none` and `HS*` rejected), `aud` contains the client id (and
   * `azp`, when present with several audiences, is the client id), `exp` and `iat` are present,
   * `exp`/`nbf`/`iat` hold within 60 s of skew, `sub` is a non-empty string, and `nonce` matches
   * when given.
   *
   * Throws InvalidTokenError (→ 401), ProviderError when discovery or the JWKS cannot be fetched
   * (→ 502 on the SSO routes), UnknownProviderError for an unknown `options.provider` (→ 404).
   */
  async verifyIdToken(token: string, options: VerifyOptions = {}): Promise<VerifiedToken> {
    const named = options.provider === undefined ? undefined : this.#require(options.provider);
    const unverified = peekClaims(token);
    if (!unverified) throw new InvalidTokenError('the token is not a signed JWT');
    let header: JWSHeaderParameters;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      throw new InvalidTokenError('the token header cannot be decoded');
    }
    const alg = typeof header.alg === 'string' ? header.alg : '';
    if (!(ALLOWED_ALGORITHMS as readonly string[]).includes(alg)) {
      throw new InvalidTokenError(`signing algorithm '${alg.slice(0, 20) || 'missing'}' is not accepted`);
    }
    if (typeof unverified.iss !== 'string') throw new InvalidTokenError('the token has no issuer');
    let provider: ProviderSettings | null;
    if (named) {
      provider = sameIssuer(named.issuer, unverified.iss) ? named : null;
    } else {
      provider = this.providerForToken(token);
    }
    if (!provider) throw new InvalidTokenError('the token was not issued by a configured provider');

    const getKey = await this.#keys(provider);
    let claims: JWTPayload;
    try {
      ({ payload: claims } = await jwtVerify(token, getKey, {
        algorithms: [...ALLOWED_ALGORITHMS],
        issuer: unverified.iss,
        audience: provider.clientId,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        requiredClaims: ['exp', 'iat', 'sub'],
      }));
    } catch (error) {
      if (error instanceof InvalidTokenError || error instanceof ProviderError) throw error;
      if (error instanceof joseErrors.JWTExpired) throw new InvalidTokenError('the token has expired');
      if (error instanceof joseErrors.JWTClaimValidationFailed)
        throw new InvalidTokenError(`the token's ${error.claim} claim is not acceptable (${error.reason})`);
      if (error instanceof joseErrors.JWSSignatureVerificationFailed)
        throw new InvalidTokenError('the token signature is invalid');
      if (error instanceof joseErrors.JOSEError) throw new InvalidTokenError(`the token is invalid (${error.code})`);
      throw new InvalidTokenError('the token is invalid');
    }
    const now = Math.floor(Date.now() / 1000);
    if (typeof claims.iat !== 'number' || claims.iat > now + CLOCK_TOLERANCE_SECONDS)
      throw new InvalidTokenError("the token's iat claim is in the future");
    if (typeof claims.sub !== 'string' || claims.sub === '') throw new InvalidTokenError('the token has no subject');
    const aud = audiences(claims);
    if (aud.length > 1 && claims.azp !== undefined && claims.azp !== provider.clientId)
      throw new InvalidTokenError("the token's azp claim names another client");
    if (options.nonce !== undefined && claims.nonce !== options.nonce)
      throw new InvalidTokenError('the token nonce does not match this sign-in');
    return { provider, claims };
  }
}

/** Profile fields carried by provider claims: nick from `nickname`, `name` or `preferred_username`; picture from `picture`. */
export function profileFromClaims(claims: JWTPayload): { nick?: string; picture?: string } {
  const text = (value: unknown, max: number): string | undefined => {
    if (typeof value !== 'string') return undefined;
    const trimmed = value.trim();
    return trimmed === '' || trimmed.length > max ? undefined : trimmed;
  };
  const nick = text(claims.nickname, 200) ?? text(claims.name, 200) ?? text(claims.preferred_username, 200);
  const picture = isHttpUrl(claims.picture) ? text(claims.picture, 2048) : undefined;
  return { ...(nick !== undefined ? { nick } : {}), ...(picture !== undefined ? { picture } : {}) };
}

/** Why no user was resolved; the SSO routes answer 403 with `message`. */
export type ResolveOutcome =
  | { user: User; created: boolean; linked: boolean }
  | { user: null; reason: 'signup_closed' | 'no_email' | 'email_unverified' | 'email_taken'; message: string };

/** The claim as a normalised email address, or '' when it is absent or not an address. */
function usableEmail(claim: unknown): string {
  if (typeof claim !== 'string') return '';
  try {
    return checkEmail(claim);
  } catch {
    return '';
  }
}

const isConflict = (error: unknown) => error instanceof HttpError && error.status === 409;

/**
 * Finds or creates the user for a verified identity (README: Single sign-on, first sign-in of an
 * unknown subject):
 *
 * 1. an existing link (provider name, `sub`) → that user; `nick`/`picture` are refreshed from the
 *    claims when they changed;
 * 2. else a user with the same email is linked, only when the claims say `email_verified: true`;
 *    that user's missing `nick`/`picture` are filled in, present ones are kept;
 * 3. else, only when `SIGNUP=open` and the claims carry an email the provider marks verified, a
 *    new user is created (no password) and linked. An unverified email is never enough: an
 *    account made from someone else's address would later capture that person's verified sign-in
 *    (account pre-takeover);
 * 4. otherwise no user (the caller answers 403).
 */
export async function linkOrCreateUser(
  conn: SqlConnection,
  provider: ProviderSettings,
  claims: JWTPayload,
  settings: Pick<Settings, 'signup'>,
): Promise<ResolveOutcome> {
  const subject = claims.sub;
  if (typeof subject !== 'string' || subject === '') throw new InvalidTokenError('the token has no subject');
  const profile = profileFromClaims(claims);

  const linked = await findUserByIdentity(conn, provider.name, subject);
  if (linked) return { user: await refreshProfile(conn, linked, profile, true), created: false, linked: false };

  const email = usableEmail(claims.email);
  const verified = claims.email_verified === true;
  if (email !== '') {
    const existing = await findUserByEmail(conn, email);
    if (existing) {
      if (!verified) {
        return {
          user: null,
          reason: 'email_unverified',
          message:
            'an account with this email exists, but the provider does not mark the email as verified, so this identity cannot be linked to it',
        };
      }
      const { passwordHash: _hash, ...user } = existing;
      const winner = await link(conn, provider, subject, user);
      return { user: await refreshProfile(conn, winner, profile, false), created: false, linked: true };
    }
  }

  if (settings.signup !== 'open')
    return { user: null, reason: 'signup_closed', message: 'no account for this identity; sign-up is closed' };
  if (email === '')
    return {
      user: null,
      reason: 'no_email',
      message: 'the provider did not share an email address, which a new account needs',
    };
  if (!verified)
    return {
      user: null,
      reason: 'email_unverified',
      message: 'the provider does not mark this email as verified, which a new account needs',
    };

  let user: User;
  try {
    // The user and its link are one transaction: a concurrent sign-in of the same identity that the
    // email refuses finds this user through the link at once (no moment with the user unlinked).
    user = await createUser(conn, { email, ...profile }, { provider: provider.name, subject });
  } catch (error) {
    if (!isConflict(error)) throw error;
    // A concurrent sign-in of the same identity created the user (and its link) first, or linked
    // the identity to another user: the identity then leads to that user.
    const raced = await findUserByIdentity(conn, provider.name, subject);
    if (raced) return { user: raced, created: false, linked: false };
    return { user: null, reason: 'email_taken', message: 'an account with this email already exists' };
  }
  return { user, created: true, linked: true };
}

/** Links (provider, subject) to `user`; if a concurrent request linked it first, returns that link's user. */
async function link(conn: SqlConnection, provider: ProviderSettings, subject: string, user: User): Promise<User> {
  try {
    await linkIdentity(conn, provider.name, subject, user.id);
    return user;
  } catch (error) {
    const other = await findUserByIdentity(conn, provider.name, subject).catch(() => null);
    if (other) return other;
    throw error;
  }
}

async function refreshProfile(
  conn: SqlConnection,
  user: User,
  profile: { nick?: string; picture?: string },
  overwrite: boolean,
): Promise<User> {
  const changes: { nick?: string; picture?: string } = {};
  if (profile.nick !== undefined && profile.nick !== user.nick && (overwrite || user.nick === undefined))
    changes.nick = profile.nick;
  if (profile.picture !== undefined && profile.picture !== user.picture && (overwrite || user.picture === undefined))
    changes.picture = profile.picture;
  if (changes.nick === undefined && changes.picture === undefined) return user;
  await updateUserProfile(conn, user.id, changes);
  return (await findUserById(conn, user.id)) ?? { ...user, ...changes };
}

/** `linkOrCreateUser` without the reason: the user, or null when none may be used or created. */
export async function resolveUser(
  conn: SqlConnection,
  provider: ProviderSettings,
  claims: JWTPayload,
  settings: Pick<Settings, 'signup'>,
): Promise<User | null> {
  return (await linkOrCreateUser(conn, provider, claims, settings)).user;
}
