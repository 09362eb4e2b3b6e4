import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/http.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';

const HOST = 'docdb.localhost';
const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'durability-user' } }) };
const documentLine = (i: number) => `{"id":"doc-${i}","email":"user${i}@example.com","n":${i}}\n`;

/**
 * Streams documents into `:insert` until `stopAfter` response lines have arrived, then kills the
 * server with SIGKILL while the stream is still going; resolves with the ids acknowledged.
 */
function insertUntilKilled(server: ServedProcess, path: string, stopAfter: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const acknowledged: string[] = [];
    let killed = false;
    const req = http.request(
      {
        host: '127.0.0.1',
        port: server.internalPort,
        path,
        method: 'POST',
        headers: { host: HOST, 'content-type': 'application/x-ndjson', ...identity },
      },
      (res) => {
        if (res.statusCode !== 201) reject(new Error(`insert answered ${res.statusCode}`));
        let rest = '';
        res.on('data', (chunk: Buffer) => {
          const lines = (rest + chunk.toString()).split('\n');
          rest = lines.pop() ?? '';
          for (const line of lines) acknowledged.push((JSON.parse(line) as { id: string }).id);
          if (!killed && acknowledged.length >= stopAfter) {
            killed = true;
            void server.kill().then(() => resolve(acknowledged));
          }
        });
        res.on('error', () => {});
      },
    );
    req.on('error', () => {
      if (!killed) reject(new Error('the insert failed before the server was killed'));
    });
    let next = 0;
    const write = () => {
      while (!killed && next < 10_000_000) {
        let chunk = '';
        for (let end = next + 200; next < end; next++) chunk += documentLine(next);
        if (!req.write(chunk)) return void req.once('drain', write);
      }
    };
    write();
  });
}

async function find(port: number, path: string, body: unknown): Promise<string[]> {
  const res = await request(port, { method: 'POST', path, host: HOST, headers: identity, body: JSON.stringify(body) });
  assert.equal(res.status, 200, res.text);
  return res.text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => (JSON.parse(line) as { id: string }).id);
}

describe('docdb durability: kill -9 in the middle of a streamed insert', () => {
  let database: TestDatabase;
  let env: Record<string, string | undefined>;
  let server: ServedProcess;

  before(async () => {
    database = await createTestDatabase();
    env = { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl };
    server = await serve(['--services', 'docdb'], env);
  });

  after(async () => {
    await server.stop();
    await database.cleanup();
  });

  it('keeps every acknowledged document, and the indexes agree with the data after restart', async () => {
    const created = await request(server.internalPort, {
      method: 'POST',
      path: '/v1/databases',
      host: HOST,
      headers: identity,
      body: '{"name":"durable"}',
    });
    assert.equal(created.status, 201);
    const C = `/v1/databases/${(created.json() as { id: string }).id}/collections`;
    for (const index of [
      { name: 'by-email', type: 'map', field: 'email' },
      { name: 'by-n', type: 'btree', fields: ['-n'] },
    ]) {
      const res = await request(server.internalPort, {
        method: 'POST',
        path: `${C}/docs:createIndex`,
        host: HOST,
        headers: identity,
        body: JSON.stringify(index),
      });
      assert.equal(res.status, 201);
    }

    const acknowledged = await insertUntilKilled(server, `${C}/docs:insert`, 20_000);
    server = await serve(['--services', 'docdb'], env);

    const stored = await find(server.internalPort, `${C}/docs:find`, { limit: -1 });
    const storedSet = new Set(stored);
    const missing = acknowledged.filter((id) => !storedSet.has(id));
    assert.deepEqual(missing, [], 'every document whose line reached the client survives');
    assert.ok(stored.length >= acknowledged.length);
    // Insertion order, no gaps or duplicates: doc-0 … doc-(n-1).
    assert.deepEqual(
      stored,
      stored.map((_, i) => `doc-${i}`),
    );

    // Both indexes hold exactly the stored documents.
    const viaBtree = await find(server.internalPort, `${C}/docs:find`, { index: 'by-n', limit: -1 });
    assert.deepEqual(viaBtree, [...stored].reverse());
    for (const i of [0, Math.floor(stored.length / 2), stored.length - 1]) {
      assert.deepEqual(
        await find(server.internalPort, `${C}/docs:find`, { index: 'by-email', value: `user${i}@example.com` }),
        [`doc-${i}`],
      );
    }
    const collection = await request(server.internalPort, { path: `${C}/docs`, host: HOST, headers: identity });
    assert.equal((collection.json() as { total: number }).total, stored.length);
    const size = await request(server.internalPort, {
      method: 'POST',
      path: `${C}/docs:size`,
      host: HOST,
      headers: identity,
    });
    assert.equal(size.status, 200);
    // The unique index rejects a document it holds, so its entries are really there.
    const duplicate = await request(server.internalPort, {
      method: 'POST',
      path: `${C}/docs:insert`,
      host: HOST,
      headers: identity,
      body: documentLine(0),
    });
    assert.equal(duplicate.status, 409);
  });
});
