import autocannon from 'autocannon';
const r = await autocannon({ url: 'http://127.0.0.1:' + process.argv[2] + process.argv[3], connections: Number(process.argv[4]), duration: 3, headers: { host: 'config.localhost' } });
console.log(process.argv[3], process.argv[4], r.requests.average, r.latency.p50, r.latency.p99, r.latency.average);
