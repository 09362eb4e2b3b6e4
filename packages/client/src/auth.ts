import type { CallOptions, Transport } from './transport.ts';
import type { ResultOf, Schemas } from './types.ts';

export type LoginResult = Schemas['LoginResponse'];
export type SessionToken = Schemas['SessionToken'];
export type Me = ResultOf<'authGetMe', 200>;

/** Signing in and out (`/services/auth`). The client keeps the session token it gets. */
export class AuthApi {
  constructor(private readonly transport: Transport) {}

  /** Signs in with a password; later calls carry the session as `Authorization: Bearer`. */
  async login(email: string, password: string, options: CallOptions = {}): Promise<LoginResult> {
    const result = await this.transport.json<LoginResult>({
      method: 'POST',
      service: 'auth',
      path: '/v0/login',
      json: { email, password },
      credentials: null,
      signal: options.signal,
    });
    this.transport.token = result.token;
    return result;
  }

  /** Creates an account and signs it in (the platform must allow sign-up: `SIGNUP=open`). */
  async signup(email: string, password: string, nick?: string, options: CallOptions = {}): Promise<LoginResult> {
    const result = await this.transport.json<LoginResult>({
      method: 'POST',
      service: 'auth',
      path: '/v0/signup',
      json: nick === undefined || nick === '' ? { email, password } : { email, password, nick },
      credentials: null,
      signal: options.signal,
    });
    this.transport.token = result.token;
    return result;
  }

  /**
   * Trades the one-time code a single sign-on hands back (`?sso_code=` on the redirect target) for
   * a bearer session, with the PKCE verifier whose challenge started the sign-in (auth README:
   * Single sign-on), and uses the new token from then on.
   */
  async exchangeCode(code: string, codeVerifier?: string, options: CallOptions = {}): Promise<SessionToken> {
    const result = await this.transport.json<SessionToken>({
      method: 'POST',
      service: 'auth',
      path: '/v0/session/token',
      json: codeVerifier === undefined ? { code } : { code, code_verifier: codeVerifier },
      credentials: null,
      signal: options.signal,
    });
    this.transport.token = result.token;
    return result;
  }

  /** Ends the session on the platform (every instance at once) and forgets its token here. */
  async logout(options: CallOptions = {}): Promise<void> {
    try {
      await this.transport.empty({ method: 'POST', service: 'auth', path: '/v0/logout', signal: options.signal });
    } finally {
      this.transport.token = undefined;
    }
  }

  /** The signed-in user. */
  me(options: CallOptions = {}): Promise<Me> {
    return this.transport.json<Me>({ method: 'GET', service: 'auth', path: '/v0/me', signal: options.signal });
  }

  /**
   * Trades the current session for a new bearer session of the same user (the old one stays
   * valid until it expires or logs out) and uses the new token from then on.
   */
  async refresh(options: CallOptions = {}): Promise<SessionToken> {
    const result = await this.transport.json<SessionToken>({
      method: 'POST',
      service: 'auth',
      path: '/v0/session/token',
      signal: options.signal,
    });
    this.transport.token = result.token;
    return result;
  }

  /** The bearer token the client sends, if any. */
  get token(): string | undefined {
    return this.transport.token;
  }
}
