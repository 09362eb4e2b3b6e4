import autocannon from 'autocannon';
const mode = process.argv[2];
const opts: autocannon.Options = { url: 'http://127.0.0.1:18080', connections: 50, duration: 4, headers: { host: 'config.localhost', 'content-type': 'application/json' } };
if (mode === 'static') opts.url += '/v0/configs/a';
if (mode === 'setup') opts.requests = [{ method: 'GET', setupRequest: (r) => ({ ...r, path: '/v0/configs/a' }) }];
if (mode === 'list10') opts.requests = Array.from({ length: 9 }, () => ({ method: 'GET' as const, path: '/v0/configs/a' })).concat([{ method: 'PATCH' as const, path: '/v0/configs/a', body: '{"q":1}' } as never]);
if (mode === 'patch') { opts.url += '/v0/configs/a'; opts.method = 'PATCH'; opts.body = '{"q":1}'; }
const r = await autocannon(opts);
console.log(mode, Math.round(r.requests.average), r.latency.p50, r.latency.p99, r.non2xx);
