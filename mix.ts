import autocannon from 'autocannon';
import { readFileSync } from 'node:fs';
const [pid] = process.argv.slice(2);
const ticks = () => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' '); return Number(f[11]) + Number(f[12]); };
const rnd = () => `/v0/configs/cfg-${Math.floor(Math.random() * 10000)}`;
const get = { method: 'GET' as const, setupRequest: (r: autocannon.Request) => ({ ...r, path: rnd() }) };
const patch = { method: 'PATCH' as const, setupRequest: (r: autocannon.Request) => ({ ...r, path: rnd(), body: '{"q":1}' }) };
for (const mode of ['get', 'patch', 'mix']) {
  const t0 = ticks();
  const r = await autocannon({ url: 'http://127.0.0.1:18080', connections: 50, duration: 4, headers: { host: 'config.localhost', 'content-type': 'application/json' }, requests: mode === 'get' ? [get] : mode === 'patch' ? [patch] : [get, get, get, get, get, get, get, get, get, patch] });
  const t1 = ticks();
  console.log(mode, Math.round(r.requests.average), 'req/s', ((t1 - t0) * 10000 / r.requests.total).toFixed(1), 'µs CPU/request', r.non2xx);
}
