import autocannon from 'autocannon';
const mode = process.argv[2];
const rnd = () => `/v0/configs/cfg-${Math.floor(Math.random() * 10000)}`;
const get = { method: 'GET' as const, setupRequest: (r: autocannon.Request) => ({ ...r, path: rnd() }) };
const patch = { method: 'PATCH' as const, setupRequest: (r: autocannon.Request) => ({ ...r, path: rnd(), body: '{"q":1}' }) };
const opts: autocannon.Options = { url: 'http://127.0.0.1:18080', connections: 50, duration: 4, headers: { host: 'config.localhost', 'content-type': 'application/json' } };
opts.requests = mode === 'get' ? [get] : mode === 'patch' ? [patch] : [get, get, get, get, get, get, get, get, get, patch];
const r = await autocannon(opts);
console.log(mode, Math.round(r.requests.average), r.latency.p50, r.latency.p99, r.non2xx);
