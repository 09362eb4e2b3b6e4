import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  readFileSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { BackupError, createBackup, restoreBackup, type BackupManifest } from '../../src/store/backup.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { request, type HttpResponse } from '../helpers/http.ts';
import { runCli, serve, type ServedProcess } from '../helpers/serve.ts';

// Backups are of the embedded store: every process here runs on SQLite, whatever the suite's database.
const EMBEDDED = { DATABASE_URL: undefined, LAMBDA_SECRETS_KEY: undefined };
const identity = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'user-backup' } }) };
const SECRET = 'tok-backup-7f3e91-secret';

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

function call(
  server: ServedProcess,
  host: string,
  method: string,
  path: string,
  body?: string | Buffer | object,
  headers: Record<string, string> = {},
): Promise<HttpResponse> {
  const json = body !== undefined && !Buffer.isBuffer(body) && typeof body === 'object';
  return request(server.internalPort, {
    method,
    path,
    host,
    headers: { ...identity, ...(json ? { 'content-type': 'application/json' } : {}), ...headers },
    body: json ? JSON.stringify(body) : (body as string | Buffer | undefined),
  });
}

/** The file's content, or null when it is not found. */
function download(server: ServedProcess, bucket: string, name: string): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: server.internalPort,
        path: `/v1/buckets/${bucket}/files/${name}`,
        headers: { ...identity, host: 'files.localhost' },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve(res.statusCode === 200 ? Buffer.concat(chunks) : null));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** A fresh copy of a backup (new files, not links) with one change made by `damage`. */
function damagedCopy(backup: string, to: string, damage: (dir: string) => void): string {
  cpSync(backup, to, { recursive: true });
  damage(to);
  return to;
}

function flipByte(path: string, at: number): void {
  const bytes = readFileSync(path);
  bytes[at] = bytes[at]! ^ 0x01;
  // A new file in place of the old one (the backup's blob may be a hard link).
  unlinkSync(path);
  writeFileSync(path, bytes);
}

function blobFiles(dir: string): string[] {
  const files: string[] = [];
  for (const a of readdirSync(join(dir, 'blobs'))) {
    if (a === 'inline.db') continue;
    for (const b of readdirSync(join(dir, 'blobs', a)))
      for (const name of readdirSync(join(dir, 'blobs', a, b))) files.push(join(dir, 'blobs', a, b, name));
  }
  return files;
}

describe('stratus backup and restore of the embedded store', () => {
  let database: TestDatabase;
  let root: string;
  let source: ServedProcess;
  let backupDir: string;
  let restoredDir: string;

  before(async () => {
    database = await createTestDatabase();
    root = database.dataDir;
    source = await serve([], { DATA_DIR: join(root, 'data'), ...EMBEDDED });
  });
  after(async () => {
    await source?.stop();
    await database?.cleanup();
  });

  it('backs up while the platform serves and a writer keeps writing; the restored platform has it all', async () => {
    // Data through the HTTP API: files (one inline, one a blob file), a replaced file, docdb
    // documents, a lambda with a secret, a config entry, a registry blob.
    const bucket = (await call(source, 'files.localhost', 'POST', '/v1/buckets', { name: 'kept' })).json<{
      id: string;
    }>().id;
    const small = Buffer.from('a small file, kept inline');
    const large = randomBytes(200_000);
    const put = async (name: string, content: Buffer) => {
      const res = await call(source, 'files.localhost', 'PUT', `/v1/buckets/${bucket}/files/${name}`, content);
      assert.ok(res.status === 201 || res.status === 200, res.text);
    };
    await put('small.txt', small);
    await put('large.bin', large);
    await put('replaced.bin', randomBytes(100_000));
    const replacement = randomBytes(90_000);
    await put('replaced.bin', replacement);

    const db = await call(source, 'docdb.localhost', 'POST', '/v1/databases', { name: 'shop' });
    assert.equal(db.status, 201, db.text);
    const C = `/v1/databases/${db.json<{ id: string }>().id}/collections/items`;
    const inserted = await call(
      source,
      'docdb.localhost',
      'POST',
      `${C}:insert`,
      Array.from({ length: 50 }, (_, i) => `{"id":"seed-${i}","n":${i}}\n`).join(''),
    );
    assert.equal(inserted.status, 201, inserted.text);

    const lambda = await call(source, 'lambda.localhost', 'POST', '/api/v0/lambdas', {
      name: 'token',
      code: 'export default async (req, ctx) => ({ token: ctx.env.TOKEN })',
      secrets: { TOKEN: SECRET },
    });
    assert.equal(lambda.status, 201, lambda.text);
    const lambdaId = lambda.json<{ id: string }>().id;
    assert.deepEqual((await call(source, 'lambda.localhost', 'GET', `/run/${lambdaId}`)).json(), { token: SECRET });

    const config = await call(source, 'config.localhost', 'POST', '/v0/configs', {
      id: 'site',
      entries: { theme: 'dark' },
    });
    assert.ok(config.status < 300, config.text);

    const layer = randomBytes(80_000);
    const pushed = await call(
      source,
      'run.localhost',
      'POST',
      `/v2/backup/app/blobs/uploads/?digest=sha256:${sha256(layer)}`,
      layer,
      { 'content-type': 'application/octet-stream' },
    );
    assert.equal(pushed.status, 201, pushed.text);

    // A writer that keeps uploading files (small and large), deleting some, and inserting documents.
    const written = new Map<string, string>(); // file name → sha256 of its content, once answered
    const deleted = new Set<string>();
    const docs: string[] = [];
    let stop = false;
    let failed = false;
    const writer = (async () => {
      for (let n = 0; !stop; n++) {
        const content = n % 2 === 0 ? randomBytes(100 + n) : randomBytes(70_000 + n);
        await put(`loop/${n}`, content);
        written.set(`loop/${n}`, sha256(content));
        if (n % 3 === 2) {
          const res = await call(source, 'files.localhost', 'DELETE', `/v1/buckets/${bucket}/files/loop/${n - 1}`);
          assert.equal(res.status, 204, res.text);
          deleted.add(`loop/${n - 1}`);
        }
        const doc = await call(source, 'docdb.localhost', 'POST', `${C}:insert`, `{"id":"loop-${n}","n":${n}}\n`);
        assert.equal(doc.status, 201, doc.text);
        docs.push(`loop-${n}`);
      }
    })();
    writer.catch(() => (failed = true));
    while (written.size < 6 && !failed) await new Promise((resolve) => setTimeout(resolve, 20));

    backupDir = join(root, 'backup');
    // What the writer had been answered when the backup was started.
    const backupStarted = { files: new Set(written.keys()), deleted: new Set(deleted), docs: docs.length };
    const startedAt = performance.now();
    const backup = await runCli(['backup', '--to', backupDir, '--data-dir', join(root, 'data')], EMBEDDED);
    const seconds = (performance.now() - startedAt) / 1000;
    const writtenDuringBackup = written.size - backupStarted.files.size;
    stop = true;
    await writer;
    assert.equal(backup.code, 0, backup.output);
    assert.match(backup.output, /backup of .* written to/);
    assert.ok(writtenDuringBackup > 0, `the writer kept writing during the ${seconds.toFixed(1)} s backup`);

    const manifest = JSON.parse(readFileSync(join(backupDir, 'backup.json'), 'utf8')) as BackupManifest;
    assert.equal(manifest.format, 'stratus-backup');
    assert.equal(manifest.database, 'stratus.db');
    assert.equal(manifest.secretsKey, 'file');
    assert.ok(manifest.blobs.inline.count > 0 && manifest.blobs.files.count > 0, JSON.stringify(manifest.blobs));
    assert.deepEqual(manifest.files.map((f) => f.path).sort(), ['blobs/inline.db', 'lambda-secrets.key', 'stratus.db']);
    assert.equal(statSync(join(backupDir, 'lambda-secrets.key')).mode & 0o777, 0o600);

    restoredDir = join(root, 'restored');
    const restore = await runCli(['restore', '--from', backupDir, '--data-dir', restoredDir], EMBEDDED);
    assert.equal(restore.code, 0, restore.output);
    assert.equal(statSync(join(restoredDir, 'lambda-secrets.key')).mode & 0o777, 0o600);
    assert.deepEqual(
      readdirSync(root).filter((name) => name.includes('.restore-')),
      [],
      'no temporary directory left',
    );

    const restored = await serve([], { DATA_DIR: restoredDir, ...EMBEDDED });
    try {
      assert.deepEqual(await download(restored, bucket, 'small.txt'), small);
      assert.deepEqual(await download(restored, bucket, 'large.bin'), large);
      assert.deepEqual(await download(restored, bucket, 'replaced.bin'), replacement);

      // Consistent: every file the restored platform lists reads back whole, with the content
      // its row names and that was uploaded under that name.
      const listed = (await call(restored, 'files.localhost', 'GET', `/v1/buckets/${bucket}/list/`)).json<
        { name: string; hash_sha256: string }[]
      >();
      for (const file of listed) {
        const content = await download(restored, bucket, file.name);
        assert.ok(content, `${file.name} reads back`);
        assert.equal(sha256(content), file.hash_sha256, file.name);
        if (file.name.startsWith('loop/')) assert.equal(written.get(file.name), file.hash_sha256, file.name);
      }
      // Complete: what was answered before the backup started is there, and what was deleted
      // before then is not (a file deleted while the backup ran may be either).
      const names = new Set(listed.map((f) => f.name));
      for (const name of backupStarted.files) {
        if (backupStarted.deleted.has(name)) assert.equal(names.has(name), false, `${name} was deleted`);
        else if (!deleted.has(name)) assert.equal(names.has(name), true, `${name} was written`);
      }

      const found = await call(restored, 'docdb.localhost', 'POST', `${C}:find`, { limit: -1 });
      assert.equal(found.status, 200, found.text);
      const ids = found.text
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => (JSON.parse(line) as { id: string }).id);
      const idSet = new Set(ids);
      for (let i = 0; i < 50; i++) assert.ok(idSet.has(`seed-${i}`), `seed-${i}`);
      for (const id of docs.slice(0, backupStarted.docs)) assert.ok(idSet.has(id), id);
      assert.ok(ids.length <= 50 + docs.length + 1, `${ids.length} documents, at most the ones written`);

      assert.deepEqual((await call(restored, 'lambda.localhost', 'GET', `/run/${lambdaId}`)).json(), {
        token: SECRET,
      });
      const site = await call(restored, 'config.localhost', 'GET', '/v0/configs/site');
      assert.equal(site.status, 200, site.text);
      assert.deepEqual(site.json<{ entries: unknown }>().entries, { theme: 'dark' });
      const blob = await call(restored, 'run.localhost', 'HEAD', `/v2/backup/app/blobs/sha256:${sha256(layer)}`);
      assert.equal(blob.status, 200);
      assert.equal(blob.headers['content-length'], String(layer.length));
    } finally {
      await restored.stop();
    }
  });

  it('refuses a damaged or incomplete backup, and a non-empty data directory, writing nothing', async () => {
    assert.ok(backupDir, 'the first test made a backup');
    const blob = blobFiles(backupDir)[0]!;
    const inBackup = (path: string) => path.slice(backupDir.length + 1);
    const noRestoreLeftovers = () =>
      assert.deepEqual(
        readdirSync(root).filter((name) => name.includes('.restore-')),
        [],
        'no temporary directory left',
      );

    // Through the CLI: a changed byte in the database.
    const badDb = damagedCopy(backupDir, join(root, 'bad-db'), (dir) => flipByte(join(dir, 'stratus.db'), 5000));
    const refused = await runCli(['restore', '--from', badDb, '--data-dir', join(root, 'target-bad-db')], EMBEDDED);
    assert.equal(refused.code, 1, refused.output);
    assert.match(refused.output, /^stratus restore: .*stratus\.db does not match its checksum in backup\.json/m);
    assert.equal(existsSync(join(root, 'target-bad-db')), false);
    noRestoreLeftovers();

    // The same checks in process, for the other damages.
    const cases: { name: string; damage: (dir: string) => void; error: RegExp }[] = [
      {
        name: 'a changed byte in a blob file',
        damage: (dir) => flipByte(join(dir, inBackup(blob)), 100),
        error: /is damaged: its content's sha256 is/,
      },
      {
        name: 'a changed byte in the inline blobs',
        damage: (dir) => flipByte(join(dir, 'blobs', 'inline.db'), 4000),
        error: /inline\.db does not match its checksum in backup\.json/,
      },
      {
        name: 'a missing blob file',
        damage: (dir) => unlinkSync(join(dir, inBackup(blob))),
        error: /blobs are missing or were added/,
      },
      {
        name: 'no manifest',
        damage: (dir) => unlinkSync(join(dir, 'backup.json')),
        error: /is not a Stratus backup: it has no backup\.json/,
      },
    ];
    for (const [i, c] of cases.entries()) {
      const from = damagedCopy(backupDir, join(root, `damaged-${i}`), c.damage);
      // Into a new directory, and into an existing empty one (staged inside it).
      const target = join(root, `target-${i}`);
      const existing = i % 2 === 1;
      if (existing) mkdirSync(target);
      await assert.rejects(
        restoreBackup({ from, dataDir: target }),
        (error: Error) => error instanceof BackupError && c.error.test(error.message),
        c.name,
      );
      if (existing) assert.deepEqual(readdirSync(target), [], `${c.name}: nothing written`);
      else assert.equal(existsSync(target), false, `${c.name}: nothing written`);
    }
    noRestoreLeftovers();

    const occupied = join(root, 'occupied');
    mkdirSync(occupied);
    writeFileSync(join(occupied, 'keep.txt'), 'mine');
    await assert.rejects(
      restoreBackup({ from: backupDir, dataDir: occupied }),
      /occupied is not empty: restore only into a new or empty data directory/,
    );
    assert.deepEqual(readdirSync(occupied), ['keep.txt']);
  });

  it('refuses to back up into a non-empty directory, and on PostgreSQL', async () => {
    const occupied = join(root, 'occupied-backup');
    mkdirSync(occupied);
    writeFileSync(join(occupied, 'keep.txt'), 'mine');
    await assert.rejects(
      createBackup({ dataDir: join(root, 'data'), to: occupied }),
      /occupied-backup is not empty: back up into a new or empty directory/,
    );
    assert.deepEqual(readdirSync(occupied), ['keep.txt']);

    const postgres = { ...EMBEDDED, DATABASE_URL: 'postgres://stratus@127.0.0.1:1/stratus' };
    const [backup, restore] = await Promise.all([
      runCli(['backup', '--to', join(root, 'pg-backup'), '--data-dir', join(root, 'data')], postgres),
      runCli(['restore', '--from', backupDir, '--data-dir', join(root, 'pg-restore')], postgres),
    ]);
    assert.equal(backup.code, 1, backup.output);
    assert.match(backup.output, /^stratus backup: DATABASE_URL is set: .*pg_dump/m);
    assert.equal(existsSync(join(root, 'pg-backup')), false);
    assert.equal(restore.code, 1, restore.output);
    assert.match(restore.output, /^stratus restore: DATABASE_URL is set: .*pg_restore/m);
    assert.equal(existsSync(join(root, 'pg-restore')), false);
  });

  it('copies blobs where it cannot link them, and fails clearly on a data directory missing a referenced blob', async (t) => {
    // /dev/shm is another file system here: hard links cannot reach it.
    if (!existsSync('/dev/shm') || statSync('/dev/shm').dev === statSync(root).dev)
      return t.skip('no second file system to back up to');
    const elsewhere = mkdtempSync('/dev/shm/stratus-backup-');
    try {
      const copied = await createBackup({ dataDir: join(root, 'data'), to: join(elsewhere, 'backup') });
      assert.equal(copied.linked, 0);
      assert.ok(copied.manifest.blobs.files.count > 0);
      // Into an existing empty directory (as a mount point would be), kept with its mode.
      mkdirSync(join(root, 'from-copy'), { mode: 0o750 });
      await restoreBackup({ from: join(elsewhere, 'backup'), dataDir: join(root, 'from-copy') });
      assert.equal(statSync(join(root, 'from-copy')).mode & 0o777, 0o750);
      assert.deepEqual(readdirSync(join(root, 'from-copy')).sort(), ['blobs', 'lambda-secrets.key', 'stratus.db']);
      assert.equal(blobFiles(join(root, 'from-copy')).length, copied.manifest.blobs.files.count);
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }

    // The restored data directory (no platform on it now) with one referenced blob file gone.
    unlinkSync(blobFiles(restoredDir)[0]!);
    const target = join(root, 'from-damaged');
    await assert.rejects(
      createBackup({ dataDir: restoredDir, to: target }),
      (error: Error) =>
        error instanceof BackupError &&
        /referenced in the database snapshot, is not in .*: a referenced blob is never deleted/.test(error.message),
    );
    assert.equal(existsSync(target), false, 'nothing left of the failed backup');
  });
});
