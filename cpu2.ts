import autocannon from 'autocannon';
import { readFileSync } from 'node:fs';
const [port, pid, label] = process.argv.slice(2);
const ticks = () => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' '); return Number(f[11]) + Number(f[12]); };
const t0 = ticks();
const r = await autocannon({ url: `http://127.0.0.1:${port}/v0/configs/a`, method: 'PATCH', body: '{"q":1}', connections: 50, duration: 4, headers: { host: 'config.localhost', 'content-type': 'application/json' } });
const t1 = ticks();
console.log(label, Math.round(r.requests.average), 'req/s', ((t1 - t0) * 10000 / r.requests.total).toFixed(1), 'µs CPU/request', r.non2xx);
