/**
 * A real OpenID Connect identity provider for tests: `oidc-provider` (v9) on 127.0.0.1, port 0.
 *
 * ```ts
 * const idp = await startTestIdp({ accounts: [{ sub: 'alice', email: 'alice@example.com', email_verified: true, name: 'Alice' }] });
 * after(() => idp.close());
 * // configure Stratus with: { name: 'test', issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret }
 *
 * // Browser-style code flow: follow the authorization URL your app redirected to, "log in" as an
 * // account, and get back the URL the provider sends the browser to (the app's redirect_uri with
 * // `code`, `state` and `iss`, or `error=access_denied` with { deny: true }).
 * const callback = await idp.authorize(location, { account: 'alice' });
 *
 * // A real ID token from the provider (full code flow with PKCE run against the provider itself):
 * const idToken = await idp.obtainIdToken('alice', { nonce: 'n-1' });
 *
 * // An ID token with any claims/header, signed with the provider's own published key (so it
 * // verifies against its JWKS): defaults iss=issuer, aud=clientId, sub='alice', iat=now, exp=now+600.
 * const expired = await idp.signIdToken({ sub: 'alice', exp: Math.floor(Date.now() / 1000) - 3600 });
 * ```
 *
 * API (all on the object `startTestIdp` resolves to):
 * - `issuer`, `port`, `clientId`, `clientSecret`: what to put in `settings.authProviders`.
 * - `kid`, `publicJwk`: the provider's signing key (RS256) as published at its `jwks_uri`.
 * - `setAccount(account)`: add or replace an account (claims: `email`, `email_verified`, `name`,
 *   `nickname`, `preferred_username`, `picture`).
 * - `authorize(url, { account } | { deny: true })`: drives the login interaction over HTTP (own
 *   cookie jar per call, consent granted automatically) and returns the final redirect URL.
 * - `obtainIdToken(account, { nonce?, scope? })`: a provider-issued ID token (aud = clientId).
 * - `signIdToken(claims, { header?, key? })`: a JWT signed with the provider's key (or `key`).
 * - `requests`: paths the provider served, in order (to assert e.g. that discovery was cached).
 * - `close()`: stops the server (call it in `after`).
 *
 * Clients: one confidential client (`client_secret_basic` by default) allowed to use any redirect
 * URI matching `redirectUriPattern` (default: `http(s)://auth.<anything>/v0/sso/<name>/callback`)
 * plus the helper's own `<issuer>/rp/callback`. PKCE (S256) is required for every authorization.
 */
import { createHash, randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  exportJWK,
  generateKeyPair,
  SignJWT,
  type CryptoKey,
  type JWK,
  type JWTHeaderParameters,
  type JWTPayload,
} from 'jose';

export interface TestAccount {
  sub: string;
  email?: string;
  email_verified?: boolean;
  name?: string;
  nickname?: string;
  preferred_username?: string;
  picture?: string;
}

export interface TestIdpOptions {
  clientId?: string;
  clientSecret?: string;
  accounts?: TestAccount[];
  /** Redirect URIs the client may use (besides the helper's own). */
  redirectUriPattern?: RegExp;
  /** How the client authenticates at the token endpoint (advertised in discovery accordingly). */
  tokenEndpointAuthMethod?: 'client_secret_basic' | 'client_secret_post';
  /** ID token lifetime in seconds (default 600). */
  idTokenTtl?: number;
}

export interface TestIdp {
  readonly issuer: string;
  readonly port: number;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly kid: string;
  readonly publicJwk: JWK;
  readonly requests: string[];
  setAccount(account: TestAccount): void;
  authorize(authorizationUrl: string, as: { account: string } | { deny: true }): Promise<URL>;
  obtainIdToken(account: string, options?: { nonce?: string; scope?: string }): Promise<string>;
  signIdToken(
    claims: JWTPayload,
    options?: { header?: Partial<JWTHeaderParameters>; key?: CryptoKey | Uint8Array },
  ): Promise<string>;
  close(): Promise<void>;
}

// oidc-provider ships no type declarations: the few members used here, typed by hand.
interface InteractionDetails {
  uid: string;
  prompt: { name: string };
  params: Record<string, unknown>;
  session?: { accountId?: string };
}
interface GrantInstance {
  addOIDCScope(scope: string): void;
  save(): Promise<string>;
}
interface ProviderCtx {
  oidc: {
    client?: { clientId: string };
    params?: Record<string, unknown>;
    session?: { accountId?: string };
    result?: { consent?: { grantId?: string } };
    provider: { Grant: GrantConstructor };
  };
}
type GrantConstructor = (new (init: { accountId?: string; clientId?: string }) => GrantInstance) & {
  find(id: string): Promise<GrantInstance | undefined>;
};
interface ProviderInstance {
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<InteractionDetails>;
  interactionFinished(
    req: IncomingMessage,
    res: ServerResponse,
    result: Record<string, unknown>,
    options?: { mergeWithLastSubmission?: boolean },
  ): Promise<void>;
  Grant: GrantConstructor;
  Client: { prototype: { redirectUriAllowed(this: { redirectUris: string[] }, uri: string): boolean } };
  on(event: string, listener: (...args: unknown[]) => void): void;
}
type ProviderConstructor = new (issuer: string, configuration: Record<string, unknown>) => ProviderInstance;

// A string-typed specifier keeps TypeScript from looking for declarations the package lacks.
const OIDC_PROVIDER_MODULE: string = 'oidc-provider';

const STEP_TIMEOUT_MS = 5_000;

const b64url = (bytes: Buffer) => bytes.toString('base64url');

/**
 * Keeps oidc-provider's start-up warnings (an "unsupported" Node line, the in-memory adapter being
 * "development-only") off the test output while `work` runs; other warnings pass.
 */
async function quietly<T>(work: () => T | Promise<T>): Promise<T> {
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    if (typeof args[0] === 'string' && args[0].includes('oidc-provider WARNING')) return;
    warn(...args);
  };
  try {
    return await work();
  } finally {
    console.warn = warn;
  }
}

let providerModule: Promise<ProviderConstructor> | undefined;
function loadProvider(): Promise<ProviderConstructor> {
  providerModule ??= quietly(
    async () => ((await import(OIDC_PROVIDER_MODULE)) as { default: ProviderConstructor }).default,
  );
  return providerModule;
}

export async function startTestIdp(options: TestIdpOptions = {}): Promise<TestIdp> {
  const Provider = await loadProvider();
  const clientId = options.clientId ?? 'stratus-test';
  const clientSecret = options.clientSecret ?? `secret-${randomBytes(12).toString('hex')}`;
  const pattern = options.redirectUriPattern ?? /^https?:\/\/auth\.[^/?#]+\/v0\/sso\/[^/?#]+\/callback$/;
  const accounts = new Map<string, TestAccount>((options.accounts ?? []).map((a) => [a.sub, { ...a }]));
  const requests: string[] = [];

  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const kid = `test-${randomBytes(6).toString('hex')}`;
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
  const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...publicJwk } = privateJwk;

  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  const server = http.createServer((req, res) => handler(req, res));
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const issuer = `http://127.0.0.1:${port}`;
  // The helper's own client redirect (obtainIdToken); never requested, the driver stops there.
  const ownRedirect = 'http://rp.localhost/callback';

  const provider = await quietly(
    () =>
      new Provider(issuer, {
        clients: [
          {
            client_id: clientId,
            client_secret: clientSecret,
            redirect_uris: [ownRedirect],
            grant_types: ['authorization_code'],
            response_types: ['code'],
            token_endpoint_auth_method: options.tokenEndpointAuthMethod ?? 'client_secret_basic',
          },
        ],
        clientAuthMethods: [options.tokenEndpointAuthMethod ?? 'client_secret_basic'],
        jwks: { keys: [privateJwk] },
        cookies: { keys: [randomBytes(16).toString('hex')] },
        claims: {
          openid: ['sub'],
          email: ['email', 'email_verified'],
          profile: ['name', 'nickname', 'preferred_username', 'picture'],
        },
        // Scope-requested claims go into the ID token too, as most providers do.
        conformIdTokenClaims: false,
        features: { devInteractions: { enabled: false } },
        pkce: { required: () => true },
        ttl: {
          IdToken: options.idTokenTtl ?? 600,
          AccessToken: 600,
          AuthorizationCode: 60,
          Interaction: 600,
          Session: 3600,
          Grant: 3600,
        },
        async findAccount(_ctx: unknown, id: string) {
          const account = accounts.get(id);
          if (!account) return undefined;
          return {
            accountId: id,
            async claims() {
              return { ...account, sub: id };
            },
          };
        },
        // Consent is implied: each sign-in gets a grant for the scopes it asked for.
        async loadExistingGrant(ctx: ProviderCtx) {
          const { Grant } = ctx.oidc.provider;
          const grantId = ctx.oidc.result?.consent?.grantId;
          if (grantId) return Grant.find(grantId);
          const grant = new Grant({ accountId: ctx.oidc.session?.accountId, clientId: ctx.oidc.client?.clientId });
          grant.addOIDCScope(typeof ctx.oidc.params?.scope === 'string' ? ctx.oidc.params.scope : 'openid');
          await grant.save();
          return grant;
        },
      }),
  );
  // Redirect URIs: the registered one, or any matching the test pattern.
  const registered = provider.Client.prototype.redirectUriAllowed;
  provider.Client.prototype.redirectUriAllowed = function (this: { redirectUris: string[] }, uri: string) {
    return pattern.test(uri) || registered.call(this, uri);
  };
  // Errors are part of what the tests provoke; keep them off the console.
  provider.on('server_error', () => {});

  const callback = provider.callback();
  handler = (req, res) => {
    const url = new URL(req.url ?? '/', issuer);
    requests.push(url.pathname);
    if (url.pathname.startsWith('/interaction/')) {
      interaction(req, res, url).catch((error: unknown) => {
        res.statusCode = 500;
        res.end(`interaction failed: ${(error as Error).message}`);
      });
      return;
    }
    callback(req, res);
  };

  async function interaction(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const details = await provider.interactionDetails(req, res);
    if (url.searchParams.has('deny')) {
      await provider.interactionFinished(
        req,
        res,
        { error: 'access_denied', error_description: 'the user refused' },
        { mergeWithLastSubmission: false },
      );
      return;
    }
    const accountId = url.searchParams.get('account') ?? '';
    if (details.prompt.name === 'login') {
      if (!accounts.has(accountId)) {
        res.statusCode = 400;
        res.end(`unknown test account '${accountId}'`);
        return;
      }
      await provider.interactionFinished(req, res, { login: { accountId } });
      return;
    }
    // consent (only if a grant did not cover the request)
    const grant = new provider.Grant({
      accountId: details.session?.accountId,
      clientId: String(details.params.client_id),
    });
    grant.addOIDCScope(String(details.params.scope ?? 'openid'));
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  }

  async function authorize(authorizationUrl: string, as: { account: string } | { deny: true }): Promise<URL> {
    const jar = new Map<string, string>();
    let url = new URL(authorizationUrl);
    for (let step = 0; step < 10; step++) {
      if (url.origin !== issuer) return url;
      if (url.pathname.startsWith('/interaction/')) {
        if ('deny' in as) url.searchParams.set('deny', '1');
        else url.searchParams.set('account', as.account);
      }
      const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
      const response = await fetch(url, {
        redirect: 'manual',
        headers: cookie ? { cookie } : {},
        signal: AbortSignal.timeout(STEP_TIMEOUT_MS),
      });
      for (const line of response.headers.getSetCookie()) {
        const [pair] = line.split(';');
        const eq = pair?.indexOf('=') ?? -1;
        if (pair && eq > 0) jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
      }
      const location = response.headers.get('location');
      const body = await response.text();
      if (response.status < 300 || response.status >= 400 || !location) {
        throw new Error(`test IdP answered ${response.status} at ${url.pathname}: ${body.slice(0, 500)}`);
      }
      url = new URL(location, url);
    }
    throw new Error('test IdP: too many redirects');
  }

  async function obtainIdToken(account: string, opts: { nonce?: string; scope?: string } = {}): Promise<string> {
    const verifier = b64url(randomBytes(32));
    const state = b64url(randomBytes(16));
    const auth = new URL(`${issuer}/auth`);
    auth.search = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: ownRedirect,
      scope: opts.scope ?? 'openid email profile',
      state,
      nonce: opts.nonce ?? b64url(randomBytes(16)),
      code_challenge: b64url(createHash('sha256').update(verifier).digest()),
      code_challenge_method: 'S256',
    }).toString();
    const back = await authorize(auth.href, { account });
    const code = back.searchParams.get('code');
    if (!code || back.searchParams.get('state') !== state)
      throw new Error(`test IdP: no code in ${back.pathname}${back.search.replace(/code=[^&]+/, 'code=…')}`);
    const form = new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: ownRedirect,
      code_verifier: verifier,
    });
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
    if ((options.tokenEndpointAuthMethod ?? 'client_secret_basic') === 'client_secret_basic') {
      headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`).toString('base64')}`;
    } else {
      form.set('client_id', clientId);
      form.set('client_secret', clientSecret);
    }
    const response = await fetch(`${issuer}/token`, {
      method: 'POST',
      headers,
      body: form,
      signal: AbortSignal.timeout(STEP_TIMEOUT_MS),
    });
    const json = (await response.json()) as { id_token?: unknown; error?: unknown };
    if (response.status !== 200 || typeof json.id_token !== 'string')
      throw new Error(`test IdP token endpoint answered ${response.status} ${String(json.error)}`);
    return json.id_token;
  }

  async function signIdToken(
    claims: JWTPayload,
    opts: { header?: Partial<JWTHeaderParameters>; key?: CryptoKey | Uint8Array } = {},
  ): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    const payload: JWTPayload = { iss: issuer, aud: clientId, sub: 'alice', iat: now, exp: now + 600, ...claims };
    for (const [name, value] of Object.entries(payload)) if (value === undefined) delete payload[name];
    const header: JWTHeaderParameters = { alg: 'RS256', kid, typ: 'JWT', ...opts.header } as JWTHeaderParameters;
    return new SignJWT(payload).setProtectedHeader(header).sign(opts.key ?? privateKey);
  }

  return {
    issuer,
    port,
    clientId,
    clientSecret,
    kid,
    publicJwk,
    requests,
    setAccount(account) {
      accounts.set(account.sub, { ...account });
    },
    authorize,
    obtainIdToken,
    signIdToken,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
