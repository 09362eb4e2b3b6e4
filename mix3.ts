import autocannon from 'autocannon';
const port = process.argv[2];
const rnd = () => `/v0/configs/cfg-${Math.floor(Math.random() * 10000)}`;
const get = { method: 'GET' as const, setupRequest: (r: autocannon.Request) => ({ ...r, path: rnd() }) };
const patch = { method: 'PATCH' as const, setupRequest: (r: autocannon.Request) => ({ ...r, path: rnd(), body: '{"q":1}' }) };
const r = await autocannon({ url: `http://127.0.0.1:${port}`, connections: 50, duration: 4, headers: { host: 'config.localhost', 'content-type': 'application/json' }, requests: [get, get, get, get, get, get, get, get, get, patch] });
console.log(port === '18080' ? 'file' : 'pipe', Math.round(r.requests.average));
