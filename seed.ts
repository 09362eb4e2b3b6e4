import autocannon from 'autocannon';
let i = 0;
await autocannon({ url: 'http://127.0.0.1:18080/v0/configs', connections: 20, amount: 10000, headers: { host: 'config.localhost', 'content-type': 'application/json' },
  requests: [{ method: 'POST', setupRequest: (r) => ({ ...r, body: JSON.stringify({ id: `cfg-${i++}`, entries: { 'feature.enabled': true, 'service.name': `svc-${i}`, 'limits.rps': i, 'owner.team': 'platform' } }) }) }] });
console.log('seeded', i);
