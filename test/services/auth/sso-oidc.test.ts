import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPair, SignJWT, UnsecuredJWT, type JWTPayload } from 'jose';
import {
  InvalidTokenError,
  OidcProviders,
  ProviderError,
  UnknownProviderError,
  linkOrCreateUser,
  profileFromClaims,
  resolveUser,
  type ProviderSettings,
} from '../../../src/services/auth/oidc.ts';
import { authService } from '../../../src/services/auth/index.ts';
import { createUser, findUserById, findUserByIdentity } from '../../../src/services/auth/repository.ts';
import { closedPort } from '../../helpers/http.ts';
import { startTestIdp, type TestIdp } from '../../helpers/oidc-provider.ts';
import { startTestService, type TestService } from '../../helpers/service.ts';
import { countRows } from './helpers.ts';

const now = () => Math.floor(Date.now() / 1000);

async function rejectsWith(
  promise: Promise<unknown>,
  type: new (...args: never[]) => Error,
  pattern?: RegExp,
): Promise<Error> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof type, `expected ${type.name}, got ${String(caught)}`);
  if (pattern) assert.match(caught.message, pattern);
  return caught;
}

describe('OidcProviders', { timeout: 60_000 }, () => {
  let idp: TestIdp;
  let other: TestIdp;
  let providers: OidcProviders;
  let test1: ProviderSettings;
  let downPort: number;

  before(async () => {
    idp = await startTestIdp({
      accounts: [{ sub: 'alice', email: 'alice@example.com', email_verified: true, name: 'Alice' }],
    });
    other = await startTestIdp({ clientId: 'other-client' });
    downPort = await closedPort();
    test1 = { name: 'test', issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret };
    providers = new OidcProviders(
      [
        test1,
        { name: 'other', issuer: other.issuer, clientId: other.clientId, clientSecret: other.clientSecret },
        { name: 'down', issuer: `http://127.0.0.1:${downPort}`, clientId: 'x', clientSecret: 'y' },
      ],
      { timeoutMs: 3000 },
    );
  });
  after(async () => {
    await idp.close();
    await other.close();
  });

  test('get and list the configured providers', () => {
    assert.equal(providers.get('test')?.issuer, idp.issuer);
    assert.equal(providers.get('nope'), undefined);
    assert.deepEqual(
      providers.list().map((p) => p.name),
      ['test', 'other', 'down'],
    );
  });

  test('discover fetches the openid-configuration once and caches it', async () => {
    const before = idp.requests.filter((p) => p === '/.well-known/openid-configuration').length;
    const first = await providers.discover('test');
    const second = await providers.discover('test');
    assert.equal(first.issuer, idp.issuer);
    assert.equal(first.authorization_endpoint, `${idp.issuer}/auth`);
    assert.equal(first.token_endpoint, `${idp.issuer}/token`);
    assert.equal(first.jwks_uri, `${idp.issuer}/jwks`);
    assert.deepEqual(first.token_endpoint_auth_methods_supported, ['client_secret_basic']);
    assert.equal(second, first);
    const after = idp.requests.filter((p) => p === '/.well-known/openid-configuration').length;
    assert.ok(after - before <= 1, `discovery fetched ${after - before} times`);
  });

  test('discover: unknown provider, unreachable issuer, wrong issuer, bad document', async () => {
    await rejectsWith(providers.discover('nope'), UnknownProviderError);
    await rejectsWith(providers.discover('down'), ProviderError, /discovery for provider 'down' request failed/);

    const fake = (doc: unknown, status = 200) =>
      new OidcProviders([{ name: 'fake', issuer: 'https://idp.example', clientId: 'c', clientSecret: 's' }], {
        fetch: async () =>
          new Response(typeof doc === 'string' ? doc : JSON.stringify(doc), {
            status,
            headers: { 'content-type': 'application/json' },
          }),
      });
    const good = {
      issuer: 'https://idp.example',
      authorization_endpoint: 'https://idp.example/a',
      token_endpoint: 'https://idp.example/t',
      jwks_uri: 'https://idp.example/k',
    };
    assert.equal((await fake(good).discover('fake')).token_endpoint, 'https://idp.example/t');
    assert.equal(
      (await fake({ ...good, issuer: 'https://idp.example/' }).discover('fake')).issuer,
      'https://idp.example/',
    );
    await rejectsWith(
      fake({ ...good, issuer: 'https://evil.example' }).discover('fake'),
      ProviderError,
      /another issuer/,
    );
    await rejectsWith(fake({ ...good, jwks_uri: 'ftp://x' }).discover('fake'), ProviderError, /jwks_uri/);
    await rejectsWith(fake({ ...good, token_endpoint: undefined }).discover('fake'), ProviderError, /token_endpoint/);
    await rejectsWith(fake('<html>', 200).discover('fake'), ProviderError, /JSON/);
    await rejectsWith(fake(good, 500).discover('fake'), ProviderError, /answered 500/);
  });

  test('a failed discovery is not cached', async () => {
    let calls = 0;
    const flaky = new OidcProviders([{ name: 'f', issuer: 'https://idp.example', clientId: 'c', clientSecret: 's' }], {
      fetch: async () => {
        calls++;
        if (calls === 1) throw new TypeError('fetch failed');
        return Response.json({
          issuer: 'https://idp.example',
          authorization_endpoint: 'https://idp.example/a',
          token_endpoint: 'https://idp.example/t',
          jwks_uri: 'https://idp.example/k',
        });
      },
    });
    await rejectsWith(flaky.discover('f'), ProviderError);
    assert.equal((await flaky.discover('f')).issuer, 'https://idp.example');
    assert.equal(calls, 2);
  });

  test('providerForToken picks the configured issuer without verifying', async () => {
    const token = await idp.signIdToken({});
    assert.equal(providers.providerForToken(token)?.name, 'test');
    assert.equal(providers.providerForToken(await other.signIdToken({}))?.name, 'other');
    // An unsigned token from a configured issuer is still "from that issuer" (and then fails verification).
    assert.equal(providers.providerForToken(new UnsecuredJWT({ iss: idp.issuer }).encode())?.name, 'test');
    const stranger = await new SignJWT({ iss: 'https://elsewhere.example' })
      .setProtectedHeader({ alg: 'HS256' })
      .sign(new Uint8Array(32));
    assert.equal(providers.providerForToken(stranger), null);
    for (const value of [
      '',
      'abc',
      'a.b',
      'a.b.c.d',
      'pB3v9Yk0cQ2m7xN4s8TzW1eR6uJ5hL0a',
      '!!!.???.***',
      `${token}x.y`,
      'e30.e30.sig',
    ]) {
      assert.equal(providers.providerForToken(value), null, value);
    }
  });

  test('providerForToken: with several providers on one issuer, aud decides', async () => {
    const twin = new OidcProviders([
      { name: 'a', issuer: idp.issuer, clientId: 'client-a', clientSecret: 's' },
      { name: 'b', issuer: idp.issuer, clientId: 'client-b', clientSecret: 's' },
    ]);
    assert.equal(twin.providerForToken(await idp.signIdToken({ aud: 'client-b' }))?.name, 'b');
    assert.equal(twin.providerForToken(await idp.signIdToken({ aud: ['x', 'client-a'] }))?.name, 'a');
    assert.equal(twin.providerForToken(await idp.signIdToken({ aud: 'unknown' }))?.name, 'a');
  });

  test('verifyIdToken accepts a real ID token from the provider', async () => {
    const token = await idp.obtainIdToken('alice', { nonce: 'nonce-1' });
    const { provider, claims } = await providers.verifyIdToken(token);
    assert.equal(provider.name, 'test');
    assert.equal(claims.sub, 'alice');
    assert.equal(claims.email, 'alice@example.com');
    assert.equal(claims.email_verified, true);
    assert.equal(
      (await providers.verifyIdToken(token, { provider: 'test', nonce: 'nonce-1' })).claims.nonce,
      'nonce-1',
    );
  });

  test('verifyIdToken rejects a wrong or missing nonce when one is expected', async () => {
    const token = await idp.obtainIdToken('alice', { nonce: 'nonce-1' });
    await rejectsWith(providers.verifyIdToken(token, { nonce: 'nonce-2' }), InvalidTokenError, /nonce/);
    await rejectsWith(
      providers.verifyIdToken(await idp.signIdToken({}), { nonce: 'nonce-2' }),
      InvalidTokenError,
      /nonce/,
    );
  });

  test('verifyIdToken rejects tokens of other issuers, other providers, and malformed ones', async () => {
    await rejectsWith(
      providers.verifyIdToken(await idp.signIdToken({ iss: 'https://elsewhere.example' })),
      InvalidTokenError,
      /configured provider/,
    );
    // A configured issuer, but not the provider the route is for.
    await rejectsWith(
      providers.verifyIdToken(await other.signIdToken({}), { provider: 'test' }),
      InvalidTokenError,
      /configured provider/,
    );
    await rejectsWith(providers.verifyIdToken('not-a-jwt'), InvalidTokenError);
    await rejectsWith(providers.verifyIdToken('a.b.c'), InvalidTokenError);
    await rejectsWith(providers.verifyIdToken(await idp.signIdToken({}), { provider: 'nope' }), UnknownProviderError);
  });

  test('verifyIdToken rejects alg none and HMAC, even keyed with the client secret', async () => {
    const none = new UnsecuredJWT({
      iss: idp.issuer,
      aud: idp.clientId,
      sub: 'alice',
      iat: now(),
      exp: now() + 600,
    }).encode();
    await rejectsWith(providers.verifyIdToken(none), InvalidTokenError, /algorithm 'none'/);
    for (const alg of ['HS256', 'HS384', 'HS512']) {
      const hmac = await new SignJWT({ iss: idp.issuer, aud: idp.clientId, sub: 'alice' })
        .setProtectedHeader({ alg, kid: idp.kid })
        .setIssuedAt()
        .setExpirationTime('10m')
        .sign(new TextEncoder().encode(idp.clientSecret));
      await rejectsWith(providers.verifyIdToken(hmac), InvalidTokenError, new RegExp(`algorithm '${alg}'`));
    }
  });

  test('verifyIdToken rejects a bad signature, a foreign key and an unknown kid', async () => {
    const token = await idp.signIdToken({});
    const [header, payload] = token.split('.');
    const forged = `${header}.${Buffer.from(JSON.stringify({ iss: idp.issuer, aud: idp.clientId, sub: 'mallory', iat: now(), exp: now() + 600 })).toString('base64url')}.${token.split('.')[2]}`;
    await rejectsWith(providers.verifyIdToken(forged), InvalidTokenError, /signature/);
    assert.ok(payload);
    const { privateKey } = await generateKeyPair('RS256');
    await rejectsWith(
      providers.verifyIdToken(await idp.signIdToken({}, { key: privateKey })),
      InvalidTokenError,
      /signature/,
    );
    await rejectsWith(
      providers.verifyIdToken(await idp.signIdToken({}, { key: privateKey, header: { kid: 'unknown-kid' } })),
      InvalidTokenError,
      /no key/,
    );
  });

  test('verifyIdToken checks aud, azp, exp, nbf, iat and sub with 60 s of skew', async () => {
    const t = now();
    const reject = async (claims: JWTPayload, pattern: RegExp) =>
      rejectsWith(providers.verifyIdToken(await idp.signIdToken(claims)), InvalidTokenError, pattern);
    await reject({ aud: 'someone-else' }, /aud/);
    await reject({ aud: ['someone-else', 'another'] }, /aud/);
    await reject({ aud: undefined }, /aud/);
    await reject({ aud: [idp.clientId, 'another'], azp: 'another' }, /azp/);
    await reject({ exp: t - 61 }, /expired/);
    await reject({ exp: undefined }, /exp/);
    await reject({ nbf: t + 120 }, /nbf/);
    await reject({ iat: t + 120 }, /iat/);
    await reject({ iat: undefined }, /iat/);
    await reject({ sub: undefined }, /sub/);
    await reject({ sub: '' }, /subject/);
    // Within the 60 s skew.
    const lenient = await idp.signIdToken({
      exp: t - 30,
      nbf: t + 30,
      iat: t + 30,
      aud: [idp.clientId, 'another'],
      azp: idp.clientId,
    });
    assert.equal((await providers.verifyIdToken(lenient)).claims.sub, 'alice');
  });

  test('error messages never contain the token', async () => {
    const token = await idp.signIdToken({ aud: 'someone-else' });
    const error = await rejectsWith(providers.verifyIdToken(token), InvalidTokenError);
    assert.ok(!error.message.includes(token));
    for (const part of token.split('.')) assert.ok(!error.message.includes(part));
  });

  test('an unreachable issuer is a provider error, not an invalid token', async () => {
    const token = await new SignJWT({ iss: `http://127.0.0.1:${downPort}`, aud: 'x', sub: 's' })
      .setProtectedHeader({ alg: 'RS256' })
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign((await generateKeyPair('RS256')).privateKey);
    await rejectsWith(providers.verifyIdToken(token), ProviderError);
  });

  test('a JWKS that cannot be fetched is a provider error', async () => {
    const broken = new OidcProviders([test1], {
      fetch: async (input, init) => {
        const url = String(input instanceof Request ? input.url : input);
        if (url.endsWith('/jwks')) return new Response('nope', { status: 503 });
        return fetch(input, init);
      },
    });
    await rejectsWith(broken.verifyIdToken(await idp.signIdToken({})), ProviderError, /key set/);
  });

  test('exchangeCode authenticates as discovery allows and reports failures without secrets', async () => {
    const seen: { authorization: string | null; body: string }[] = [];
    const doc = {
      issuer: 'https://idp.example',
      authorization_endpoint: 'https://idp.example/a',
      token_endpoint: 'https://idp.example/t',
      jwks_uri: 'https://idp.example/k',
    };
    const make = (methods: string[] | undefined, answer: () => Response) =>
      new OidcProviders(
        [{ name: 'p', issuer: 'https://idp.example', clientId: 'client id', clientSecret: 's3cr3t:+/' }],
        {
          fetch: async (input, init) => {
            if (String(input).endsWith('openid-configuration'))
              return Response.json({ ...doc, token_endpoint_auth_methods_supported: methods });
            seen.push({ authorization: new Headers(init?.headers).get('authorization'), body: String(init?.body) });
            return answer();
          },
        },
      );
    const input = {
      code: 'the-code',
      redirectUri: 'http://auth.localhost/v0/sso/p/callback',
      verifier: 'the-verifier',
    };

    assert.deepEqual(await make(undefined, () => Response.json({ id_token: 'x.y.z' })).exchangeCode('p', input), {
      idToken: 'x.y.z',
    });
    const basic = seen.pop();
    assert.equal(basic?.authorization, `Basic ${Buffer.from('client+id:s3cr3t%3A%2B%2F').toString('base64')}`);
    const form = new URLSearchParams(basic?.body);
    assert.equal(form.get('grant_type'), 'authorization_code');
    assert.equal(form.get('code'), 'the-code');
    assert.equal(form.get('redirect_uri'), input.redirectUri);
    assert.equal(form.get('code_verifier'), 'the-verifier');
    assert.equal(form.get('client_secret'), null);

    await make(['client_secret_post'], () => Response.json({ id_token: 'x.y.z' })).exchangeCode('p', input);
    const post = seen.pop();
    assert.equal(post?.authorization, null);
    assert.equal(new URLSearchParams(post?.body).get('client_id'), 'client id');
    assert.equal(new URLSearchParams(post?.body).get('client_secret'), 's3cr3t:+/');

    await rejectsWith(
      make(['private_key_jwt'], () => Response.json({})).exchangeCode('p', input),
      ProviderError,
      /neither/,
    );
    const failed = await rejectsWith(
      make(undefined, () =>
        Response.json({ error: 'invalid_grant', error_description: 'code the-code is bad' }, { status: 400 }),
      ).exchangeCode('p', input),
      ProviderError,
      /answered 400 \(invalid_grant\)/,
    );
    assert.ok(!failed.message.includes('the-code') && !failed.message.includes('s3cr3t'));
    await rejectsWith(
      make(undefined, () => Response.json({ access_token: 'a' })).exchangeCode('p', input),
      ProviderError,
      /no id_token/,
    );
    await rejectsWith(
      make(undefined, () => new Response('<html>', { status: 502 })).exchangeCode('p', input),
      ProviderError,
      /answered 502/,
    );
  });
});

describe('profileFromClaims', () => {
  test('nick from nickname, then name, then preferred_username; picture only as an http(s) URL', () => {
    assert.deepEqual(profileFromClaims({ nickname: 'ada', name: 'Ada L', preferred_username: 'al' }), { nick: 'ada' });
    assert.deepEqual(profileFromClaims({ name: 'Ada L', preferred_username: 'al' }), { nick: 'Ada L' });
    assert.deepEqual(profileFromClaims({ preferred_username: 'al', picture: 'https://example.com/a.png' }), {
      nick: 'al',
      picture: 'https://example.com/a.png',
    });
    assert.deepEqual(profileFromClaims({ nickname: '  ', picture: 'javascript:alert(1)' }), {});
    assert.deepEqual(profileFromClaims({ nickname: 42 }), {});
  });
});

describe('resolveUser (user linking)', { timeout: 60_000 }, () => {
  let open: TestService;
  let closed: TestService;
  const provider: ProviderSettings = { name: 'test', issuer: 'https://idp.example', clientId: 'c', clientSecret: 's' };

  before(async () => {
    open = await startTestService(authService, { signup: 'open' });
    closed = await startTestService(authService, { signup: 'closed' });
  });
  after(async () => {
    await open.close();
    await closed.close();
  });

  test('a new subject creates a user with profile fields when signup is open, once', async () => {
    const conn = open.store.sql;
    const claims = {
      sub: 'new-1',
      email: 'New.One@Example.com',
      email_verified: true,
      name: 'New One',
      picture: 'https://example.com/n.png',
    };
    const first = await linkOrCreateUser(conn, provider, claims, open.settings);
    assert.ok(first.user);
    assert.equal(first.created, true);
    assert.equal(first.user.email, 'new.one@example.com');
    assert.equal(first.user.nick, 'New One');
    assert.equal(first.user.picture, 'https://example.com/n.png');
    const again = await resolveUser(conn, provider, claims, open.settings);
    assert.equal(again?.id, first.user.id);
    assert.equal((await findUserByIdentity(conn, 'test', 'new-1'))?.id, first.user.id);
  });

  test('an existing link wins and refreshes nick and picture', async () => {
    const conn = open.store.sql;
    const user = await resolveUser(
      conn,
      provider,
      { sub: 'refresh-1', email: 'refresh@example.com', email_verified: true, name: 'Old' },
      open.settings,
    );
    assert.ok(user);
    const again = await resolveUser(
      conn,
      provider,
      { sub: 'refresh-1', email: 'changed@example.com', nickname: 'newnick', picture: 'https://example.com/new.png' },
      open.settings,
    );
    assert.equal(again?.id, user.id);
    assert.equal(again?.nick, 'newnick');
    assert.equal(again?.picture, 'https://example.com/new.png');
    assert.equal(again?.email, 'refresh@example.com');
    assert.equal((await findUserById(conn, user.id))?.nick, 'newnick');
  });

  test('a verified email links to the existing user (even with signup closed), keeping their nick', async () => {
    const conn = closed.store.sql;
    const existing = await createUser(conn, { email: 'ada@example.com', password: 'correct horse', nick: 'ada' });
    const outcome = await linkOrCreateUser(
      conn,
      provider,
      {
        sub: 'ada-sub',
        email: 'ADA@example.com',
        email_verified: true,
        name: 'Ada Lovelace',
        picture: 'https://example.com/ada.png',
      },
      closed.settings,
    );
    assert.ok(outcome.user);
    assert.equal(outcome.user.id, existing.id);
    assert.equal(outcome.linked, true);
    assert.equal(outcome.created, false);
    assert.equal(outcome.user.nick, 'ada');
    assert.equal(outcome.user.picture, 'https://example.com/ada.png');
    assert.equal((await findUserByIdentity(conn, 'test', 'ada-sub'))?.id, existing.id);
  });

  test('an unverified (or absent) email_verified never links to an existing user', async () => {
    for (const service of [open, closed]) {
      const conn = service.store.sql;
      await createUser(conn, { email: 'victim@example.com', password: 'correct horse' });
      const identities = await countRows(conn, 'auth_identities');
      const users = await countRows(conn, 'auth_users');
      for (const email_verified of [false, undefined, 'true']) {
        const outcome = await linkOrCreateUser(
          conn,
          provider,
          { sub: `attacker-${String(email_verified)}`, email: 'victim@example.com', email_verified },
          service.settings,
        );
        assert.equal(outcome.user, null);
        assert.ok(!outcome.user && outcome.reason === 'email_unverified');
      }
      assert.equal(await countRows(conn, 'auth_identities'), identities);
      assert.equal(await countRows(conn, 'auth_users'), users);
    }
  });

  test('signup closed: a new subject gets no user; signup open without an email neither', async () => {
    const none = await linkOrCreateUser(
      closed.store.sql,
      provider,
      { sub: 'stranger', email: 'stranger@example.com', email_verified: true },
      closed.settings,
    );
    assert.ok(!none.user && none.reason === 'signup_closed');
    assert.match(none.message, /sign-up is closed/);
    const noEmail = await linkOrCreateUser(open.store.sql, provider, { sub: 'no-email' }, open.settings);
    assert.ok(!noEmail.user && noEmail.reason === 'no_email');
    const badEmail = await linkOrCreateUser(
      open.store.sql,
      provider,
      { sub: 'bad-email', email: 'not an email', email_verified: true },
      open.settings,
    );
    assert.ok(!badEmail.user && badEmail.reason === 'no_email');
    assert.equal(await findUserByIdentity(closed.store.sql, 'test', 'stranger'), null);
  });

  test('an unverified email never creates an account (no pre-takeover)', async () => {
    const outcome = await linkOrCreateUser(
      open.store.sql,
      provider,
      { sub: 'unverified-1', email: 'victim@example.com', email_verified: false },
      open.settings,
    );
    assert.equal(outcome.user, null);
    assert.equal(outcome.user === null && outcome.reason, 'email_unverified');
    assert.equal(await findUserByIdentity(open.store.sql, 'test', 'unverified-1'), null);
  });

  test('the same subject at another provider is another identity', async () => {
    const conn = open.store.sql;
    const a = await resolveUser(
      conn,
      provider,
      { sub: 'shared-sub', email: 'shared-a@example.com', email_verified: true },
      open.settings,
    );
    const b = await resolveUser(
      conn,
      { ...provider, name: 'other' },
      { sub: 'shared-sub', email: 'shared-b@example.com', email_verified: true },
      open.settings,
    );
    assert.ok(a && b);
    assert.notEqual(a.id, b.id);
  });

  test('concurrent first sign-ins of one subject end with one user', async () => {
    const conn = open.store.sql;
    const claims = { sub: 'race-1', email: 'race@example.com', email_verified: true };
    const users = await Promise.all([1, 2, 3].map(() => resolveUser(conn, provider, claims, open.settings)));
    const ids = new Set(users.map((u) => u?.id));
    assert.equal(ids.size, 1);
    assert.ok([...ids][0]);
  });
});
