import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/http.ts';
import { serve } from '../helpers/serve.ts';

const HOST = 'kv.localhost';
const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'kv-durability' } }) };
const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });

function setKey(port: number, key: string, value: number): Promise<{ seq: number; version: number } | null> {
  return new Promise((resolve) => {
    const body = JSON.stringify({ value });
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        agent,
        method: 'POST',
        path: `/v1/collections/items/keys/${key}`,
        headers: {
          host: HOST,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          ...identity,
        },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () =>
          resolve(res.statusCode === 200 ? (JSON.parse(text) as { seq: number; version: number }) : null),
        );
        res.on('error', () => resolve(null));
      },
    );
    req.on('error', () => resolve(null));
    req.end(body);
  });
}

describe('the key-value node across kill -9', () => {
  // The node keeps its own files in DATA_DIR whatever the platform database is.
  let database: TestDatabase | undefined;
  after(async () => {
    agent.destroy();
    await database?.cleanup();
  });

  it('loses nothing acknowledged: 10,000 writes, killed mid-stream, restarted', async () => {
    database = await createTestDatabase();
    const env = { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl };
    const first = await serve(['--services', 'kv', '--kv-node-name', 'durable'], env);
    const created = await request(first.internalPort, {
      method: 'POST',
      path: '/v1/collections',
      host: HOST,
      headers: identity,
      body: '{"name":"items"}',
    });
    assert.equal(created.status, 200, created.text);

    const acknowledged = new Map<string, { value: number; seq: number }>();
    let next = 0;
    let killed = false;
    const workers = Array.from({ length: 32 }, async () => {
      while (!killed) {
        const i = next++;
        const answer = await setKey(first.internalPort, `k${i}`, i);
        if (answer) acknowledged.set(`k${i}`, { value: i, seq: answer.seq });
        if (acknowledged.size >= 10_000 && !killed) {
          killed = true;
          // Writes are still in flight: some are in the log but unanswered, some not yet in.
          await first.kill();
        }
      }
    });
    await Promise.all(workers);
    assert.ok(acknowledged.size >= 10_000);

    const second = await serve(['--services', 'kv', '--kv-node-name', 'durable'], env);
    try {
      let missing = 0;
      let after: string | null = null;
      const found = new Map<string, number>();
      do {
        const query: string = `limit=1000${after ? `&after=${encodeURIComponent(after)}` : ''}`;
        const page = await request(second.internalPort, {
          path: `/v1/collections/items/keys?${query}`,
          host: HOST,
          headers: identity,
        });
        assert.equal(page.status, 200, page.text);
        const body = page.json<{ items: { key: string; value: number }[]; next: string | null }>();
        for (const item of body.items) found.set(item.key, item.value);
        after = body.next;
      } while (after);
      for (const [key, { value }] of acknowledged) if (found.get(key) !== value) missing++;
      assert.equal(missing, 0, `${missing} acknowledged writes lost`);
      // seq never goes back: a new write continues after every acknowledged one.
      const highest = Math.max(...[...acknowledged.values()].map((a) => a.seq));
      const fresh = await request(second.internalPort, {
        method: 'POST',
        path: '/v1/collections/items/keys/after-restart',
        host: HOST,
        headers: identity,
        body: '{"value":1}',
      });
      assert.ok(fresh.json<{ seq: number }>().seq > highest);
      const ready = await request(second.internalPort, { path: '/readyz', host: HOST });
      assert.equal(ready.status, 200);
    } finally {
      await second.stop();
    }
  });
});
