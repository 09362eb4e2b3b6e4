import autocannon from 'autocannon';
const [port, path, conns, method] = process.argv.slice(2);
const r = await autocannon({ url: 'http://127.0.0.1:' + port + path, method: (method ?? 'GET') as 'GET', body: method === 'PATCH' ? '{"y":2}' : undefined, connections: Number(conns), duration: 4, headers: { host: 'config.localhost', 'content-type': 'application/json' } });
console.log(path, conns, method ?? 'GET', Math.round(r.requests.average), r.latency.p50, r.latency.p99, r.non2xx);
