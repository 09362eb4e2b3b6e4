import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestIdp, type TestIdp } from '../helpers/oidc-provider.ts';
import { startHarness, type Harness } from './harness.ts';

describe('gateway: Authorization: Bearer <JWT> from a configured provider (gateway.md §3.6)', () => {
  let idp: TestIdp;
  let h: Harness;

  before(async () => {
    idp = await startTestIdp({
      accounts: [{ sub: 'alice', email: 'alice@example.com', email_verified: true, name: 'Alice' }],
    });
    h = await startHarness({
      authProviders: [{ name: 'test', issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret }],
      signup: 'open',
    });
  });
  after(async () => {
    await h?.close();
    await idp?.close();
  });

  const identityOf = (headers: Record<string, string>) =>
    JSON.parse(headers['x-gateway-authentication'] ?? 'null') as {
      user: { id: string; email?: string };
      auth: { method: string };
    } | null;

  it('accepts a valid ID token, maps it to the linked user and removes it', async () => {
    const token = await idp.obtainIdToken('alice');
    const res = await h.call({ path: '/x', headers: { authorization: `Bearer ${token}` } });
    assert.equal(res.status, 200);
    const seen = h.seen(res);
    const identity = identityOf(seen.headers);
    assert.equal(identity?.auth.method, 'bearer');
    assert.equal(identity?.user.email, 'alice@example.com');
    assert.equal(seen.headers.authorization, undefined);
    const again = await h.call({
      path: '/v0/secret',
      host: 'gateway.localhost',
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(again.status, 200);
  });

  it('rejects a token from the configured issuer that fails validation, on optional routes too', async () => {
    const now = Math.floor(Date.now() / 1000);
    const bad = [
      await idp.signIdToken({ sub: 'alice', exp: now - 3600, iat: now - 7200 }),
      await idp.signIdToken({ sub: 'alice', aud: 'someone-else' }),
      (await idp.signIdToken({ sub: 'alice' })).slice(0, -4) + 'AAAA',
    ];
    for (const token of bad) {
      const res = await h.call({ path: '/x', headers: { authorization: `Bearer ${token}` } });
      assert.equal(res.status, 401);
      assert.equal(res.json<{ error: { code: string } }>().error.code, 'unauthorized');
    }
  });

  it('leaves a JWT from an unknown issuer to the backend on optional routes', async () => {
    const header = Buffer.from('{"alg":"RS256"}').toString('base64url');
    const payload = Buffer.from(JSON.stringify({ iss: 'https://elsewhere.example', sub: 'x' })).toString('base64url');
    const foreign = `${header}.${payload}.c2ln`;
    const res = await h.call({ path: '/x', headers: { authorization: `Bearer ${foreign}` } });
    assert.equal(res.status, 200);
    assert.equal(h.seen(res).headers.authorization, `Bearer ${foreign}`);
    assert.equal(identityOf(h.seen(res).headers), null);
  });
});
