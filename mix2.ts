import autocannon from 'autocannon';
const rnd = () => `/v0/configs/cfg-${Math.floor(Math.random() * 10000)}`;
const get = { method: 'GET' as const, setupRequest: (r: autocannon.Request) => ({ ...r, path: rnd() }) };
const patch = { method: 'PATCH' as const, setupRequest: (r: autocannon.Request) => ({ ...r, path: rnd(), body: '{"q":1}' }) };
const r = await autocannon({ url: 'http://127.0.0.1:18080', connections: 50, duration: 12, headers: { host: 'config.localhost', 'content-type': 'application/json' }, requests: [get, get, get, get, get, get, get, get, get, patch] });
console.log(Math.round(r.requests.average));
