import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

// Issue 17, item 12: a request body that stops arriving is cut (408), one that keeps arriving is
// not, and one client address cannot hold more than its share of connections.

/** A raw connection to the public port; resolves with everything the server sent once it closes. */
function connect(port: number): Promise<{ socket: net.Socket; closed: Promise<string> }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      let received = '';
      socket.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
      const closed = new Promise<string>((done) => socket.once('close', () => done(received)));
      resolve({ socket, closed });
    });
    socket.once('error', reject);
  });
}

const head = (length: number) =>
  `POST /v0/configs HTTP/1.1\r\nHost: config.localhost\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

describe('slow clients on the public port', () => {
  let t: TestPlatform;

  before(async () => {
    t = await startTestPlatform({ bodyIdleTimeoutSeconds: 0.4, maxConnectionsPerAddress: 6 });
  });

  after(async () => {
    await t.close();
  });

  it('answers 408 and closes the connection when the body stops arriving', async () => {
    const { socket, closed } = await connect(t.platform.publicPort);
    const body = '{"id":"stalled","entries":{}}';
    socket.write(head(body.length) + body.slice(0, 5));
    const started = Date.now();
    const received = await Promise.race([closed, sleep(10_000).then(() => 'still open after 10 s')]);
    assert.match(received, /^HTTP\/1\.1 408 /, received);
    assert.match(received, /"code":"request_timeout"/);
    assert.ok(Date.now() - started < 5_000, 'cut within a few idle periods');
    const list = await t.call({ path: '/v0/configs/stalled', host: 'config.localhost' });
    assert.equal(list.status, 404, 'nothing was stored');
  });

  it('lets a slow upload through as long as bytes keep arriving', async () => {
    const { socket, closed } = await connect(t.platform.publicPort);
    const body = '{"id":"trickled","entries":{"a":1}}';
    socket.write(head(body.length));
    // One byte every 100 ms: 3.5 s in all, many idle periods long, never idle for one.
    for (const char of body) {
      socket.write(char);
      await sleep(100);
    }
    await sleep(200);
    socket.end();
    const received = await closed;
    assert.match(received, /^HTTP\/1\.1 201 /, received);
    assert.equal((await t.call({ path: '/v0/configs/trickled', host: 'config.localhost' })).status, 200);
  });

  it('closes connections beyond the per-address cap at once, and takes new ones when others close', async () => {
    const held = await Promise.all(Array.from({ length: 6 }, () => connect(t.platform.publicPort)));
    const extra = await connect(t.platform.publicPort);
    extra.socket.write('GET /version HTTP/1.1\r\nHost: gateway.localhost\r\n\r\n');
    const answer = await Promise.race([extra.closed, sleep(5_000).then(() => 'still open')]);
    assert.equal(answer, '', 'the seventh connection is closed without an answer');
    held[0]!.socket.destroy();
    await held[0]!.closed;
    await sleep(50);
    const next = await t.call({ path: '/version', host: 'gateway.localhost' });
    assert.equal(next.status, 200, 'a slot is free again');
    for (const { socket } of held.slice(1)) socket.destroy();
    await Promise.all(held.slice(1).map((h) => h.closed));
  });
});
