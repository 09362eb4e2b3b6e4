import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/http.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';

const HOST = 'kv.localhost';
const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'kv-tree' } }) };

async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > 10_000) throw new Error(`${what} not within 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('stratus serve --services kv --kv-parent', () => {
  const databases: TestDatabase[] = [];
  const processes: ServedProcess[] = [];
  after(async () => {
    for (const served of processes.reverse()) await served.stop();
    for (const database of databases) await database.cleanup();
  });

  it('makes a replica of another process; writes on it reach the root; the public port guards /v1', async () => {
    const start = async (args: string[]) => {
      const database = await createTestDatabase();
      databases.push(database);
      const served = await serve(['--services', 'kv', ...args], {
        DATA_DIR: database.dataDir,
        DATABASE_URL: database.databaseUrl,
      });
      processes.push(served);
      return served;
    };
    const root = await start(['--kv-node-name', 'root']);
    await request(root.internalPort, {
      method: 'POST',
      path: '/v1/collections',
      host: HOST,
      headers: identity,
      body: '{"name":"config"}',
    });
    const replica = await start(['--kv-node-name', 'edge', '--kv-parent', `http://127.0.0.1:${root.internalPort}`]);
    await eventually(
      async () => (await request(replica.internalPort, { path: '/readyz', host: HOST })).status === 200,
      'replica ready',
    );

    const written = await request(replica.internalPort, {
      method: 'POST',
      path: '/v1/collections/config/keys/feature/flag',
      host: HOST,
      headers: identity,
      body: '{"value":true}',
    });
    assert.equal(written.status, 200, written.text);
    assert.equal(written.json<{ seq: number }>().seq, 1, 'the root assigned the first seq');
    const atRoot = await request(root.internalPort, {
      path: '/v1/collections/config/keys/feature/flag',
      host: HOST,
      headers: identity,
    });
    assert.equal(atRoot.json<{ value: boolean }>().value, true);

    const status = (await request(replica.internalPort, { path: '/v1/status', host: HOST, headers: identity })).json<{
      node: string;
      role: string;
      parent: string;
    }>();
    assert.deepEqual(
      { node: status.node, role: status.role, parent: status.parent },
      { node: 'edge', role: 'replica', parent: `http://127.0.0.1:${root.internalPort}` },
    );
    const rootStatus = (await request(root.internalPort, { path: '/v1/status', host: HOST, headers: identity })).json<{
      children: number;
    }>();
    assert.equal(rootStatus.children, 1);

    // Public port: a `require` route at the gateway, so a forged identity or none is 401 there.
    assert.equal((await request(replica.publicPort, { path: '/v1/collections', host: HOST })).status, 401);
    assert.equal(
      (await request(replica.publicPort, { path: '/v1/collections', host: HOST, headers: identity })).status,
      401,
    );
    assert.equal((await request(replica.publicPort, { path: '/readyz', host: HOST })).status, 200);
  });
});
