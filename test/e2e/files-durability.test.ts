import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import pino from 'pino';
import { VERSION } from '../../src/core/version.ts';
import { createFilesService } from '../../src/services/files/index.ts';
import { migrateStore, openStore } from '../../src/store/index.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { testSettings } from '../helpers/service.ts';
import { as, spawnFilesServer, type BucketBody, type FileBody } from '../services/files/helpers.ts';

let database: TestDatabase;
before(async () => {
  database = await createTestDatabase();
});
after(async () => {
  await database.cleanup();
});

function send(
  port: number,
  method: string,
  path: string,
  body?: string | Buffer,
): Promise<{ status: number; text: string; raw: Buffer }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...as('durable') };
    if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const raw = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, text: raw.toString(), raw });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('files durability', () => {
  test('answered writes survive kill -9: buckets, files, replacements and deletes', async () => {
    const settings = testSettings(database);
    const first = await spawnFilesServer(settings);
    const bucket = JSON.parse((await send(first.port, 'POST', '/v1/buckets', '{"name":"durable"}')).text) as BucketBody;
    const content = Buffer.from('kept across a crash '.repeat(1000));
    const kept = JSON.parse(
      (await send(first.port, 'PUT', `/v1/buckets/${bucket.id}/files/dir/kept.txt`, content)).text,
    ) as FileBody;
    assert.equal((await send(first.port, 'PUT', `/v1/buckets/${bucket.id}/files/replaced`, 'old')).status, 201);
    assert.equal((await send(first.port, 'PUT', `/v1/buckets/${bucket.id}/files/replaced`, 'new')).status, 200);
    assert.equal((await send(first.port, 'PUT', `/v1/buckets/${bucket.id}/files/deleted`, 'bye')).status, 201);
    assert.equal((await send(first.port, 'DELETE', `/v1/buckets/${bucket.id}/files/deleted`)).status, 204);
    await first.kill('SIGKILL');

    const second = await spawnFilesServer(settings);
    try {
      const got = await send(second.port, 'GET', `/v1/buckets/${bucket.id}`);
      assert.deepEqual(JSON.parse(got.text), bucket);
      const file = await send(second.port, 'GET', `/v1/buckets/${bucket.id}/files/dir/kept.txt`);
      assert.equal(file.status, 200);
      assert.ok(file.raw.equals(content));
      const meta = JSON.parse(
        (await send(second.port, 'GET', `/v1/buckets/${bucket.id}/files/dir/kept.txt?metadata`)).text,
      ) as FileBody;
      assert.deepEqual(meta, kept);
      assert.equal((await send(second.port, 'GET', `/v1/buckets/${bucket.id}/files/replaced`)).text, 'new');
      assert.equal((await send(second.port, 'GET', `/v1/buckets/${bucket.id}/files/deleted`)).status, 404);
      const listed = JSON.parse((await send(second.port, 'GET', `/v1/buckets/${bucket.id}/list/`)).text) as FileBody[];
      assert.deepEqual(
        listed.map((f) => f.name),
        ['dir/kept.txt', 'replaced'],
      );
    } finally {
      await second.kill('SIGTERM');
    }
  });

  test('closing and reopening the store on the same data keeps everything (in process)', async () => {
    const settings = testSettings(database);
    const open = async () => {
      const store = await openStore(settings);
      const service = createFilesService();
      await migrateStore(store, [service.migrations]);
      const app = await service.build({ settings, store, logger: pino({ level: 'silent' }), version: VERSION });
      await app.ready();
      return { app, store };
    };
    const one = await open();
    const bucket = (
      await one.app.inject({ method: 'POST', url: '/v1/buckets', headers: as('reopen'), payload: { name: 'reopen' } })
    ).json<BucketBody>();
    const data = Buffer.from([0, 1, 2, 3, 255, 254]);
    const file = (
      await one.app.inject({
        method: 'PUT',
        url: `/v1/buckets/${bucket.id}/files/bin`,
        headers: as('reopen'),
        payload: data,
      })
    ).json<FileBody>();
    await one.app.close();
    await one.store.close();

    const two = await open();
    try {
      const got = await two.app.inject({
        method: 'GET',
        url: `/v1/buckets/${bucket.id}/files/bin`,
        headers: as('reopen'),
      });
      assert.equal(got.statusCode, 200);
      assert.ok(got.rawPayload.equals(data));
      assert.equal(got.headers.etag, `"${createHash('sha256').update(data).digest('hex')}"`);
      assert.deepEqual(got.headers['content-type'], file.mime_type);
      const listed = (await two.app.inject({ method: 'GET', url: '/v1/buckets', headers: as('reopen') })).json<
        { id: string }[]
      >();
      assert.deepEqual(
        listed.map((b) => b.id),
        [bucket.id],
      );
    } finally {
      await two.app.close();
      await two.store.close();
    }
  });
});
