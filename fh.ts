import Fastify from 'fastify';
import http from 'node:http';
const app = Fastify();
app.get('/x', async () => ({ id: 'a', entries: { a: 1 } }));
await app.ready();
const mode = process.argv[2];
if (mode === 'listen') await app.listen({ port: 18090, host: '127.0.0.1' });
else http.createServer((req, res) => app.routing(req, res)).listen(18090, '127.0.0.1');
