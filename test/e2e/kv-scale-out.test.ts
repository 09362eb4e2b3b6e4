import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createTestDatabase, testDialect, type TestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/http.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';

const HOST = 'kv.localhost';
const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'kv-scale-out' } }) };
const skip = testDialect !== 'postgres' && 'needs a shared PostgreSQL database';

async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`${what} not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const call = (served: ServedProcess, method: string, path: string, body?: string) =>
  request(served.internalPort, {
    method,
    path,
    host: HOST,
    headers: identity,
    ...(body === undefined ? {} : { body }),
  });

/** Subscribes to a node's replication feed and collects its lines; `close` ends it. */
function subscribe(served: ServedProcess): { lines: string[]; close(): void } {
  const lines: string[] = [];
  const req = http.request({
    host: '127.0.0.1',
    port: served.internalPort,
    method: 'POST',
    path: '/v1/replicate',
    headers: { host: HOST, ...identity },
  });
  req.on('response', (res) => {
    let rest = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      const parts = (rest + chunk).split('\n');
      rest = parts.pop() ?? '';
      lines.push(...parts);
    });
    res.on('error', () => {});
  });
  req.on('error', () => {});
  req.end();
  return { lines, close: () => req.destroy() };
}

describe('one key-value node served by several instances on one PostgreSQL database', { skip }, () => {
  const databases: TestDatabase[] = [];
  const processes: ServedProcess[] = [];
  after(async () => {
    for (const served of processes.reverse()) await served.stop();
    for (const database of databases) await database.cleanup();
  });

  async function instances(count: number, args: string[]): Promise<ServedProcess[]> {
    const database = await createTestDatabase();
    databases.push(database);
    const started: ServedProcess[] = [];
    for (let i = 0; i < count; i++) {
      const served = await serve(['--services', 'kv', ...args], {
        DATA_DIR: `${database.dataDir}/${i}`,
        DATABASE_URL: database.databaseUrl,
      });
      processes.push(served);
      started.push(served);
    }
    return started;
  }

  it('serves the same collections, keys, seq and versions on every instance, and feeds children from any of them', async () => {
    const [a, b] = await instances(2, ['--kv-node-name', 'shared']);
    assert.equal((await call(a!, 'POST', '/v1/collections', '{"name":"users"}')).status, 200);
    assert.deepEqual(
      (await call(b!, 'GET', '/v1/collections')).json(),
      { collections: ['users'] },
      'a collection created on one instance is there on the other',
    );
    const feed = subscribe(b!);
    try {
      await eventually(async () => feed.lines.some((line) => line.includes('"PING"')), 'the feed on b to start');
      const seqs: number[] = [];
      for (let i = 0; i < 20; i++) {
        const written = await call(
          i % 2 === 0 ? a! : b!,
          'POST',
          '/v1/collections/users/keys/alice',
          JSON.stringify({ value: i }),
        );
        assert.equal(written.status, 200, written.text);
        const answer = written.json<{ seq: number; version: number }>();
        assert.equal(answer.version, i + 1, 'versions count the writes through both instances');
        seqs.push(answer.seq);
        // Both instances answer the write at once: neither serves its cached copy of the key.
        for (const instance of [a!, b!]) {
          const read = (await call(instance, 'GET', '/v1/collections/users/keys/alice')).json<{ version: number }>();
          assert.equal(read.version, i + 1, 'a read through either instance sees the write just acknowledged');
        }
      }
      assert.deepEqual(
        seqs,
        Array.from({ length: 20 }, (_, i) => i + 1),
      );
      const read = (await call(a!, 'GET', '/v1/collections/users/keys/alice')).json<{
        value: number;
        version: number;
      }>();
      assert.deepEqual([read.value, read.version], [19, 20]);
      // Every write, including those made through a, reaches b's subscriber, in seq order.
      await eventually(
        async () => feed.lines.filter((line) => line.includes('"SET"')).length === 20,
        "all 20 writes on b's feed",
        5_000,
      );
      const fed = feed.lines
        .filter((line) => line.includes('"SET"'))
        .map((line) => (JSON.parse(line) as { seq: number }).seq);
      assert.deepEqual(fed, seqs);
    } finally {
      feed.close();
    }
  });

  it('lets one instance of a replica node follow the parent; the other takes over when it stops', async () => {
    const [root] = await instances(1, ['--kv-node-name', 'root']);
    await call(root!, 'POST', '/v1/collections', '{"name":"c"}');
    const [first, second] = await instances(2, [
      '--kv-node-name',
      'edge',
      '--kv-parent',
      `http://127.0.0.1:${root!.internalPort}`,
    ]);
    for (const replica of [first!, second!]) {
      await eventually(
        async () => (await request(replica.internalPort, { path: '/readyz', host: HOST })).status === 200,
        'both instances ready',
      );
    }
    // One follower: the root serves one child stream, not two.
    await eventually(
      async () => (await call(root!, 'GET', '/v1/status')).json<{ children: number }>().children === 1,
      'one child stream at the root',
    );
    const written = await call(second!, 'POST', '/v1/collections/c/keys/k', '{"value":1}');
    assert.equal(written.status, 200, written.text);
    await call(root!, 'POST', '/v1/collections/c/keys/from-root', '{"value":2}');
    for (const replica of [first!, second!]) {
      await eventually(
        async () => (await call(replica, 'GET', '/v1/collections/c/keys/from-root')).status === 200,
        'a root write on both instances',
      );
    }
    // The replica node's own log holds each command once, whichever instance serves the feed.
    const status = (await call(first!, 'GET', '/v1/status')).json<{ replication: { last_seq: number } }>();
    assert.equal(status.replication.last_seq, 2);

    // Stopping either instance leaves the other following (the holder gives the lease up at once).
    const following = async (replica: ServedProcess) =>
      (await call(replica, 'GET', '/v1/status')).json<{ replication: { following: boolean } }>().replication.following;
    assert.deepEqual(
      [await following(first!), await following(second!)].sort(),
      [false, true],
      'exactly one instance follows',
    );
    const [holder, other] = (await following(first!)) ? [first!, second!] : [second!, first!];
    await holder.stop();
    processes.splice(processes.indexOf(holder), 1);
    await call(root!, 'POST', '/v1/collections/c/keys/after-stop', '{"value":3}');
    await eventually(
      async () => (await call(other, 'GET', '/v1/collections/c/keys/after-stop')).status === 200,
      'the other instance following the root',
      15_000,
    );
    assert.equal((await request(other.internalPort, { path: '/readyz', host: HOST })).status, 200);
    assert.equal(await following(other), true, 'the other instance took the lease over');
  });
});
