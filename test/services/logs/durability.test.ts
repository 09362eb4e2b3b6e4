import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { VERSION } from '../../../src/core/version.ts';
import { createLogsService } from '../../../src/services/logs/index.ts';
import { openStore } from '../../../src/store/index.ts';
import { createTestDatabase } from '../../helpers/database.ts';
import { request } from '../../helpers/http.ts';
import { testSettings } from '../../helpers/service.ts';

const SERVER = fileURLToPath(new URL('./fixtures/server.ts', import.meta.url));

test('acknowledged ingests survive kill -9', async () => {
  const database = await createTestDatabase();
  const settings = testSettings(database);
  const child = spawn(process.execPath, ['--no-node-snapshot', '--import', 'tsx', SERVER], {
    env: { ...process.env, LOGS_TEST_SETTINGS: JSON.stringify(settings) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        const match = /port (\d+)/.exec(out);
        if (match) resolve(Number(match[1]));
      });
      child.once('exit', () => reject(new Error(`server exited: ${out}`)));
    });
    const auth = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'alice' } }) };
    const created = await request(port, {
      method: 'POST',
      path: '/v1/loggers',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{"name":"d"}',
    });
    const id = (JSON.parse(created.text) as { id: string }).id;
    const bodies = Array.from({ length: 20 }, (_, i) => `line ${i}\n`);
    await Promise.all(
      bodies.map(async (body) =>
        assert.equal(
          (await request(port, { method: 'POST', path: `/v1/loggers/${id}/ingest`, headers: auth, body })).status,
          200,
        ),
      ),
    );
    child.kill('SIGKILL');
    await exited;
    const store = await openStore(settings);
    const app = await createLogsService().build({
      settings,
      store,
      logger: pino({ level: 'silent' }),
      version: VERSION,
    });
    try {
      const all = await app.inject({ method: 'GET', url: `/v1/loggers/${id}/filter`, headers: auth });
      assert.deepEqual(all.body.split('\n').filter(Boolean).sort(), bodies.map((b) => b.trim()).sort());
    } finally {
      await app.close();
      await store.close();
    }
  } finally {
    child.kill('SIGKILL');
    await database.cleanup();
  }
});
