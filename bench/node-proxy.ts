// The smallest reverse proxy Node's own HTTP stack allows: node:http's server forwarding every
// request to one upstream through a keep-alive agent, headers and body piped as they come. The
// gateway bench runs it beside nginx and Stratus's front to show what a proxy costs in Node before
// any of the gateway's work. Usage: node --import tsx bench/node-proxy.ts <upstreamPort>
import http from 'node:http';

const upstreamPort = Number(process.argv[2]);
if (!Number.isInteger(upstreamPort) || upstreamPort <= 0) throw new Error('usage: node-proxy.ts <upstreamPort>');
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

const server = http.createServer((req, res) => {
  const upstream = http.request(
    { host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers: req.headers, agent },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on('error', () => {
    if (!res.headersSent) res.writeHead(502);
    res.end();
  });
  req.pipe(upstream);
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  console.log(`node proxy port ${typeof address === 'object' && address ? address.port : 0}`);
});
process.on('SIGTERM', () => {
  server.close();
  agent.destroy();
  process.exit(0);
});
