import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import { classifyAddress, EgressPolicy, EgressRefused, parseEgressAllow } from '../../src/core/egress.ts';

// Issue 22, item 1: the policy itself, on addresses only. No test opens a connection to an
// address outside loopback; the end-to-end refusals run against loopback servers.

describe('egress: address classes', () => {
  const table: [string, string][] = [
    ['8.8.8.8', 'public'],
    ['1.1.1.1', 'public'],
    ['2606:4700:4700::1111', 'public'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'shared (CGNAT)'],
    ['100.127.255.255', 'shared (CGNAT)'],
    ['169.254.169.254', 'link-local'], // cloud metadata
    ['169.254.0.1', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fd00:ec2::254', 'unique local'], // the IPv6 metadata address
    ['fc00::1', 'unique local'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['2001:db8::1', 'reserved'],
    // IPv6 forms that carry an IPv4 address reach that address.
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['::ffff:8.8.8.8', 'public'],
    ['64:ff9b::10.0.0.1', 'private'],
    ['2002:c0a8:0101::1', 'private'], // 6to4 of 192.168.1.1
    ['::127.0.0.1', 'loopback'], // IPv4-compatible
  ];
  for (const [address, kind] of table) {
    it(`${address} is ${kind}`, () => assert.equal(classifyAddress(address), kind));
  }
  it('refuses to classify what is not an address', () => {
    assert.throws(() => classifyAddress('localhost'), TypeError);
  });
  // Boundaries just outside the blocks are public.
  for (const address of ['172.32.0.1', '100.128.0.1', '11.0.0.1', '169.255.0.1', '192.169.0.1'])
    it(`${address} is public`, () => assert.equal(classifyAddress(address), 'public'));
});

describe('egress: the policy', () => {
  const resolving =
    (answers: Record<string, string[]>) =>
    async (hostname: string): Promise<LookupAddress[]> =>
      (answers[hostname] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

  it('allows public addresses and refuses the others with the reason', async () => {
    const policy = new EgressPolicy({
      ownPorts: [8080, 8081],
      resolver: resolving({ 'api.example.com': ['93.184.216.34'], 'sneaky.example.com': ['169.254.169.254'] }),
    });
    assert.deepEqual(await policy.resolve('api.example.com', 443), { address: '93.184.216.34', family: 4 });
    await assert.rejects(policy.resolve('sneaky.example.com', 80), (error: unknown) => {
      assert.ok(error instanceof EgressRefused);
      assert.match(error.message, /sneaky\.example\.com \(169\.254\.169\.254\) refused: a link-local address/);
      return true;
    });
    await assert.rejects(policy.resolve('127.0.0.1', 80), /a loopback address/);
    await assert.rejects(policy.resolve('[::1]', 80), /a loopback address/);
    await assert.rejects(policy.resolve('10.0.0.5', 80), /a private address/);
    await assert.rejects(policy.resolve('nowhere.example.com', 80), /resolves to no address/);
  });

  it('uses the first address of a name that passes, and refuses a name whose every address is refused', async () => {
    const policy = new EgressPolicy({
      ownPorts: [],
      resolver: resolving({ mixed: ['127.0.0.1', '93.184.216.34'], inside: ['10.0.0.1', '::1'] }),
    });
    assert.equal((await policy.resolve('mixed', 80)).address, '93.184.216.34');
    await assert.rejects(policy.resolve('inside', 80), /inside \(10\.0\.0\.1\) refused: a private address/);
  });

  it('opens hosts, wildcards and CIDRs from LAMBDA_EGRESS_ALLOW, but never the platform’s own ports', async () => {
    const policy = new EgressPolicy({
      allow: '127.0.0.0/8, ::1 *.internal.example  db.corp',
      ownPorts: [8080, 8081],
      resolver: resolving({ 'db.corp': ['10.0.0.7'], 'svc.internal.example': ['192.168.5.5'], other: ['10.0.0.8'] }),
    });
    assert.equal((await policy.resolve('127.0.0.1', 9000)).address, '127.0.0.1');
    assert.equal((await policy.resolve('::1', 9000)).address, '::1');
    assert.equal((await policy.resolve('db.corp', 5432)).address, '10.0.0.7');
    assert.equal((await policy.resolve('svc.internal.example', 80)).address, '192.168.5.5');
    await assert.rejects(policy.resolve('other', 80), /a private address/);
    await assert.rejects(policy.resolve('127.0.0.1', 8081), /this platform's own port/);
    await assert.rejects(policy.resolve('db.corp', 8080), /this platform's own port/);
  });

  it("refuses the platform's own ports on local addresses only: on a public one they are someone else's", async () => {
    const policy = new EgressPolicy({
      ownPorts: () => [443, 8081],
      resolver: resolving({ 'api.example.com': ['93.184.216.34'] }),
    });
    assert.equal((await policy.resolve('api.example.com', 443)).address, '93.184.216.34');
    assert.doesNotThrow(() => policy.check('api.example.com', '93.184.216.34', 8081));
    assert.throws(() => policy.check('localhost', '127.0.0.1', 443), /this platform's own port/);
    assert.throws(() => policy.check('x', '10.1.2.3', 8081), /this platform's own port/);
  });

  it('refuses an allow list it cannot read', () => {
    for (const bad of ['10.0.0.0/33', 'not a host!', '::1/129', '1.2.3.4/x'])
      assert.throws(() => parseEgressAllow(bad), /LAMBDA_EGRESS_ALLOW/, bad);
  });
});
